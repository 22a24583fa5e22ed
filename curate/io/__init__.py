"""Reading inputs into partitions of record batches, and writing Arrow shards."""

"""Reading inputs (JSONL, text folders, Parquet, Arrow IPC, saved datasets) into partitions of
record batches; `curate.output` writes the shards."""

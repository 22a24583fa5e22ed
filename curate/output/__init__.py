"""What a run writes: Arrow shards, split by id and packed when asked, in a folder
`datasets.load_from_disk` and `datasets.load_dataset` open.

`curate.io` reads inputs into record batches; this package is the other end, where a
partition's final rows become shards (and where a published version's shards are read
back as the streams they were written as).
"""

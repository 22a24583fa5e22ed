"""The stage cache: stage outputs kept per partition, reused by a later run.

code.py    a stage's code, hashed (its module and the curate modules it imports)
store.py   the on-disk store of entries: checked before reuse, LRU-evicted, locked
writer.py  an entry being written, invisible until its atomic commit
meta.py    an entry's meta.json: each file's size and xxh3_128, checked against it
names.py   the names the store gives and accepts (keys, file names, temp folders)
options.py `output.cache` in a recipe: on or off, and the size budget
settings.py a recipe's cache spec for a run, or None when off or it would not fit
keys.py    entry keys: a chain of hashes of the partition, the recipe's data keys, each stage
plan.py    the keys every pass of a build starts from (the driver's side)
decisions.py a barrier's decision, kept by its barrier and every partition's rows
replay.py  one partition's pass: entries replayed chunk by chunk, new ones kept
"""

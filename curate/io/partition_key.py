"""A partition's identity: what it holds, never where it stands in a run's plan.

A partition is named by its key, made of exactly the input's name relative to the recipe
(`InputFile.name`), the unit its range is counted in, and the range [start, stop) in that
unit: bytes of a plain JSONL file, the whole stream of a compressed one (0 to its size),
row groups of a Parquet file, record batches of an Arrow file, members (files, shards) of
a folder. Shard names, staged file names and packed-row ids derive from the key, so adding,
removing or inserting another input, or touching this one without changing it, renames
nothing of this partition; the run-wide index (`Partition.index`) stays in memory, for
input order and routing at barriers.

The key is the first 16 hex digits (64 bits) of the sha256 of the JSON array
`[name, unit, start, stop]`: short enough for file names, far from colliding at any
number of partitions a run can have (a plan refuses two partitions with one key).
"""

from __future__ import annotations

import hashlib
import json

UNITS = {
    "jsonl": "bytes",
    "jsonl.gz": "stream",
    "jsonl.zst": "stream",
    "parquet": "row_groups",
    "arrow": "record_batches",
    "text_folder": "members",
    "hf_disk": "members",
}
"""The unit each input format's partition ranges are counted in; a format not listed here
counts bytes of the file (a single partition from 0 to its size is the whole file)."""

KEY_CHARS = 16


def unit_of(fmt: str) -> str:
    return UNITS.get(fmt, "bytes")


def partition_key(name: str, unit: str, start: int, stop: int) -> str:
    """The key of the partition of input `name` covering [start, stop) in `unit`."""
    blob = json.dumps([name, unit, start, stop]).encode("ascii")  # any name, surrogates too
    return hashlib.sha256(blob).hexdigest()[:KEY_CHARS]

"""Which partitions' small shards a publish merges into one, in groups fixed by partition key.

Small partitions keep every worker busy, but a corpus of many small files, or partitions
that a filter mostly emptied, would leave a version of many tiny shards. A publish merges
them, but never in a way that lets one partition's change move another group's bytes: a
stage cache, versions that share shards and incremental runs all reuse a shard only when
its name and bytes are unchanged.

A group is a run of consecutive *small* partitions (in input order) of one split. It ends

- after a partition whose key hashes to a multiple of `GROUP_SPAN` (a property of the key
  alone, like the cut points of content-defined chunking),
- at a partition that is not small (its shards are published as they are), or
- where the next member would take the merged shard past `shard_bytes`.

So where a group ends depends only on each member's key and its own output: appending a
file changes at most the last group, and removing a document changes only the group of
its partition. A partition is small when its shards hold fewer than
`shard_bytes / SMALL_SHARE` bytes; a partition with no shards neither joins nor ends a
group unless its key does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import xxhash

GROUP_SPAN = 16
"""One key in this many ends a group: groups hold about this many small partitions."""

SMALL_SHARE = 8
"""A partition whose output is under shard_bytes / SMALL_SHARE is merged with its neighbours."""


@dataclass(frozen=True)
class Output:
    """One partition's output in one split: its key and the bytes of its shards."""

    key: str
    bytes: int


def ends_group(key: str) -> bool:
    """Whether a group ends after the partition with this key, whatever its neighbours."""
    return xxhash.xxh3_64_intdigest(key.encode()) % GROUP_SPAN == 0


def merge_groups(outputs: Sequence[Output], shard_bytes: int) -> list[list[int]]:
    """The positions of `outputs` whose shards merge, one list per merged shard, each of
    two or more consecutive partitions with shards; the rest publish as they are."""
    small = max(1, shard_bytes // SMALL_SHARE)
    groups: list[list[int]] = []
    run: list[int] = []
    size = 0

    def close() -> None:
        nonlocal run, size
        if len(run) > 1:
            groups.append(run)
        run, size = [], 0

    for i, out in enumerate(outputs):
        if out.bytes >= small:
            close()  # a partition that is not small ends the run before it
        elif out.bytes > 0:
            if run and size + out.bytes > shard_bytes:
                close()
            run.append(i)
            size += out.bytes
        if ends_group(out.key):
            close()
    close()
    return groups

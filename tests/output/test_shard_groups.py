"""Merge groups depend on each partition's key and own output only (curate.output.shard_groups)."""

from __future__ import annotations

import random

import pytest

from curate.output.shard_groups import GROUP_SPAN, SMALL_SHARE, Output, ends_group, merge_groups

SHARD = 8 * SMALL_SHARE * 1000  # small: under 8000 bytes


def _outputs(rng: random.Random, n: int) -> list[Output]:
    out = []
    for i in range(n):
        kind = rng.random()
        size = 0 if kind < 0.1 else rng.randrange(1, 8000) if kind < 0.85 else 9000
        out.append(Output(f"key-{rng.getrandbits(64):016x}-{i}", size))
    return out


def _shards(outputs: list[Output]) -> set[tuple[str, ...]]:
    """What a publish writes: merged shards by their members' keys, other partitions alone."""
    groups = merge_groups(outputs, SHARD)
    merged = {i for g in groups for i in g}
    alone = {(o.key,) for i, o in enumerate(outputs) if o.bytes and i not in merged}
    return alone | {tuple(outputs[i].key for i in g) for g in groups}


def _segment(outputs: list[Output], i: int) -> set[str]:
    """The keys of partition i's group: the small partitions between the nearest group ends
    (a key that ends a group, or a partition that is not small) on either side."""
    small = SHARD // SMALL_SHARE
    lo = i
    while lo > 0 and not ends_group(outputs[lo - 1].key) and outputs[lo - 1].bytes < small:
        lo -= 1
    hi = i
    while (
        hi + 1 < len(outputs) and not ends_group(outputs[hi].key) and outputs[hi + 1].bytes < small
    ):
        hi += 1
    return {o.key for o in outputs[lo : hi + 1]}


def test_about_one_key_in_group_span_ends_a_group() -> None:
    ends = sum(ends_group(f"k{i}") for i in range(16000))
    assert 16000 / GROUP_SPAN * 0.8 < ends < 16000 / GROUP_SPAN * 1.2


def test_merged_shards_are_consecutive_small_partitions_within_shard_size() -> None:
    rng = random.Random(1)
    outputs = _outputs(rng, 500)
    groups = merge_groups(outputs, SHARD)
    assert groups, "some small neighbours merge"
    for g in groups:
        assert len(g) > 1
        assert all(0 < outputs[i].bytes < SHARD // SMALL_SHARE for i in g)
        assert sum(outputs[i].bytes for i in g) <= SHARD
        assert not any(ends_group(outputs[i].key) for i in g[:-1])
    members = [i for g in groups for i in g]
    assert members == sorted(members) and len(set(members)) == len(members)


@pytest.mark.parametrize("seed", range(20))
def test_appending_partitions_changes_at_most_the_last_group(seed: int) -> None:
    rng = random.Random(seed)
    old = _outputs(rng, 200)
    new = old + _outputs(rng, rng.randrange(1, 30))
    changed = _shards(old) - _shards(new)
    last = _segment(old, len(old) - 1)
    assert all(set(shard) <= last for shard in changed)


@pytest.mark.parametrize("seed", range(20))
def test_one_partition_changing_changes_only_its_group(seed: int) -> None:
    rng = random.Random(100 + seed)
    old = _outputs(rng, 200)
    i = rng.randrange(len(old))
    new = list(old)
    shrink = rng.randrange(0, max(1, old[i].bytes))  # e.g. a document removed
    new[i] = Output(old[i].key, shrink)
    changed = (_shards(old) ^ _shards(new)) - {(old[i].key,)}
    mine = _segment(old, i) | _segment(new, i)
    assert all(set(shard) <= mine for shard in changed)

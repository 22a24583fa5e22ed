"""Pair scores: the estimate is datasketch's `jaccard`, the exact score is set Jaccard."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import xxhash
from datasketch import MinHash

from curate.minhash.verify import estimate_scores, exact_scores


def test_estimate_equals_datasketch_jaccard() -> None:
    sets = [[b"a", b"b", b"c"], [b"a", b"b", b"d"], [b"x"], [b"a", b"b", b"c", b"e"]]
    hashes = []
    for s in sets:
        m = MinHash(num_perm=64, hashfunc=xxhash.xxh32_intdigest)
        m.update_batch(s)
        hashes.append(m)
    values = pa.FixedSizeListArray.from_arrays(
        pa.array(np.concatenate([m.hashvalues for m in hashes])), 64
    )
    left, right = np.array([0, 0, 2, 3]), np.array([1, 3, 1, 0])
    got = estimate_scores(values, left, right)
    want = [hashes[i].jaccard(hashes[j]) for i, j in zip(left, right, strict=True)]
    assert got.tolist() == want


def test_exact_is_set_jaccard_ignoring_repeats() -> None:
    lists = [[1, 2, 3, 3, 3], [2, 3, 4], [9], [1, 2, 3], [5] * 10 + [6]]
    values = pa.array(lists, pa.list_(pa.uint32()))
    left = np.array([0, 0, 2, 3, 4, 1])
    right = np.array([1, 3, 0, 0, 4, 0])
    got = exact_scores(values, left, right)
    want = []
    for i, j in zip(left, right, strict=True):
        a, b = set(lists[i]), set(lists[j])
        want.append(len(a & b) / len(a | b))
    assert got.tolist() == want


def test_exact_on_many_pairs_in_several_probe_blocks(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import curate.minhash.verify as verify

    monkeypatch.setattr(verify, "PROBE_BLOCK", 7)
    rng = np.random.default_rng(3)
    lists = [rng.integers(0, 30, rng.integers(1, 25)).tolist() for _ in range(40)]
    values = pa.array(lists, pa.list_(pa.uint32()))
    left, right = rng.integers(0, 40, 200), rng.integers(0, 40, 200)
    got = exact_scores(values, left, right)
    for (i, j), g in zip(zip(left, right, strict=True), got, strict=True):
        a, b = set(lists[i]), set(lists[j])
        assert g == len(a & b) / len(a | b)

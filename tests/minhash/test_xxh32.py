"""xxh32_ranges equals the xxhash library on every range, whatever its length."""

from __future__ import annotations

import numpy as np
import xxhash

from curate.minhash.xxh32 import LONG, PAD, xxh32_ranges


def test_matches_xxhash_on_random_ranges() -> None:
    rng = np.random.default_rng(7)
    data = rng.integers(0, 256, 50_000, dtype=np.uint8)
    buffer = np.concatenate([data, np.zeros(PAD, np.uint8)])
    lengths = np.concatenate(
        [np.arange(0, 70), rng.integers(0, LONG + 40, 3000), [LONG, LONG + 1, 4000]]
    ).astype(np.int64)
    starts = rng.integers(0, len(data) - lengths, len(lengths))
    got = xxh32_ranges(buffer, starts, lengths)
    raw = data.tobytes()
    want = [xxhash.xxh32_intdigest(raw[s : s + n]) for s, n in zip(starts, lengths, strict=True)]
    assert got.dtype == np.uint32
    assert got.tolist() == want


def test_range_ending_at_the_last_byte() -> None:
    data = b"hello world"
    buffer = np.frombuffer(data + bytes(PAD), np.uint8)
    got = xxh32_ranges(buffer, np.array([6, 0, 10]), np.array([5, 11, 1]))
    assert got.tolist() == [xxhash.xxh32_intdigest(x) for x in (b"world", data, b"d")]

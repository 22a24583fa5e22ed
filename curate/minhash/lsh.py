"""Locality-sensitive hashing: signatures cut into bands, each band hashed to one key.

Two documents whose signatures agree on every row of some band share that band's key and
become a candidate pair. A pair with Jaccard similarity J agrees on a band of r rows with
probability J^r, so it is a candidate with probability 1 - (1 - J^r)^b over b bands
(`candidate_probability`). The key is a 64-bit mix of the band's values: a collision between
different bands (about 2^-64 per pair) only adds a candidate, which verification rejects.
"""

from __future__ import annotations

import numpy as np

U64 = np.uint64
_M1 = U64(0x9E3779B97F4A7C15)
_M2 = U64(0xBF58476D1CE4E5B9)
_M3 = U64(0x94D049BB133111EB)


def band_keys(signatures: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """(documents, bands) uint64: band i hashes signature values [i*rows, (i+1)*rows)."""
    n = len(signatures)
    values = signatures[:, : bands * rows].reshape(n, bands, rows).astype(U64)
    keys = np.broadcast_to(np.arange(1, bands + 1, dtype=U64) * _M1, (n, bands)).copy()
    t = np.empty_like(keys)
    for j in range(rows):
        np.bitwise_xor(keys, values[:, :, j], out=keys)
        np.multiply(keys, _M2, out=keys)
        np.right_shift(keys, U64(31), out=t)
        np.bitwise_xor(keys, t, out=keys)
    np.multiply(keys, _M3, out=keys)
    np.right_shift(keys, U64(29), out=t)
    np.bitwise_xor(keys, t, out=keys)
    return keys


def candidate_probability(similarity: float, bands: int, rows: int) -> float:
    """Chance that a pair with this Jaccard similarity shares at least one band."""
    return float(1.0 - (1.0 - similarity**rows) ** bands)

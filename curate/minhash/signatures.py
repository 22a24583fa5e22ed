"""MinHash signatures of a whole batch, equal to datasketch's `MinHash` values bit for bit.

datasketch 2.0's default scheme, `affine32`: each shingle's 32-bit hash is mixed once
with the MurmurHash3 finalizer, then permutation k maps it to `a[k] * h + b[k] mod 2^32`;
the signature is the minimum over the document's shingles, and a document without
shingles keeps datasketch's empty value (2^32 - 1 everywhere). The parameters `a`, `b`
are datasketch's own (`MinHash(num_perm, seed).permutations`), passed in by the stage.

Work is done on blocks of shingles laid out permutation-major, (num_perm, block): the
multiply, add and the per-document `minimum.reduceat` then run along long contiguous rows
and the block stays in cache.
"""

from __future__ import annotations

import numpy as np

U32 = np.uint32
EMPTY = U32(0xFFFFFFFF)
PERM_BLOCK = 1 << 14


def fmix32(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 32-bit finalizer, in place."""
    t = np.empty_like(h)
    for shift, mult in ((16, 0x85EBCA6B), (13, 0xC2B2AE35)):
        np.right_shift(h, U32(shift), out=t)
        np.bitwise_xor(h, t, out=h)
        np.multiply(h, U32(mult), out=h)
    np.right_shift(h, U32(16), out=t)
    np.bitwise_xor(h, t, out=h)
    return h


def signatures(hashes: np.ndarray, counts: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(documents, num_perm) uint32: each document's minimum of `a * fmix32(h) + b` over its
    shingles' hashes (`counts` per document, in order)."""
    k = len(a)
    docs = len(counts)
    nonempty = np.flatnonzero(counts)
    out = np.full((k, len(nonempty)), EMPTY, U32)
    mixed = fmix32(hashes.astype(U32, copy=True))
    starts = (np.cumsum(counts) - counts)[nonempty]
    total = len(mixed)
    a_col = a.astype(U32)[:, None]
    b_col = b.astype(U32)[:, None]
    tmp = np.empty((k, min(PERM_BLOCK, max(total, 1))), U32)
    for c0 in range(0, total, PERM_BLOCK):
        c1 = min(total, c0 + PERM_BLOCK)
        t = tmp[:, : c1 - c0]
        np.multiply(a_col, mixed[None, c0:c1], out=t)
        np.add(t, b_col, out=t)
        d0 = int(np.searchsorted(starts, c0, side="right")) - 1
        d1 = int(np.searchsorted(starts, c1, side="left"))
        seg = starts[d0:d1] - c0
        seg[0] = 0  # the first document may have begun in an earlier block
        part = np.minimum.reduceat(t, seg, axis=1)
        np.minimum(out[:, d0:d1], part, out=out[:, d0:d1])
    full = np.full((docs, k), EMPTY, U32)
    full[nonempty] = out.T
    return full

"""Similarity of candidate pairs: estimated from signatures, or exact from shingle sets.

Both take the values of each distinct document once (`values`) and pairs as indices into
them (`left`, `right`), so a document in many pairs (the first of a large cluster) is
decoded once, and both work on all pairs of a chunk with a few numpy operations.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

PROBE_BLOCK = 1 << 22
"""Shingles probed per step of `exact_scores`: bounds its working memory to ~150 MB."""


def estimate_scores(values: pa.Array, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Share of equal signature values (datasketch's `MinHash.jaccard`) for each pair."""
    sig = _signature_matrix(values)
    out = np.empty(len(left), np.float64)
    step = max(1, (1 << 24) // max(sig.shape[1], 1))
    for c in range(0, len(left), step):
        a, b = left[c : c + step], right[c : c + step]
        out[c : c + step] = np.count_nonzero(sig[a] == sig[b], axis=1) / sig.shape[1]
    return out


def _signature_matrix(values: pa.Array) -> np.ndarray:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    k = values.type.list_size
    return values.flatten().to_numpy().reshape(-1, k)


def exact_scores(values: pa.Array, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Jaccard similarity of the two documents' sets of shingle hashes, for each pair."""
    keys, bounds = _sets(values)
    sizes = np.diff(bounds)
    # probe the smaller set of each pair into the other one
    swap = sizes[right] > sizes[left]
    probe_side = np.where(swap, left, right)
    table_side = np.where(swap, right, left)
    out = np.zeros(len(left), np.float64)
    inter = np.zeros(len(left), np.int64)
    probe_sizes = sizes[probe_side]
    cum = np.cumsum(probe_sizes)
    start = 0
    while start < len(left):
        base = cum[start - 1] if start else 0
        stop = int(np.searchsorted(cum, base + PROBE_BLOCK, side="right"))
        stop = max(stop, start + 1)
        pairs = np.arange(start, stop)
        counts = probe_sizes[pairs]
        pair_of = np.repeat(pairs, counts)
        first = np.cumsum(counts) - counts
        within = np.arange(len(pair_of)) - np.repeat(first, counts)
        element = keys[bounds[probe_side[pair_of]] + within] & np.uint64(0xFFFFFFFF)
        probes = (table_side[pair_of].astype(np.uint64) << np.uint64(32)) | element
        at = np.searchsorted(keys, probes)
        at[at == len(keys)] = 0
        hit = keys[at] == probes
        inter[start:stop] = np.bincount(pair_of[hit] - start, minlength=stop - start)
        start = stop
    union = sizes[left] + sizes[right] - inter
    np.divide(inter, union, out=out, where=union > 0)
    return out


def _sets(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Each document's distinct shingle hashes as sorted keys `doc << 32 | hash`, and the
    bounds of each document's keys. Built in place: about 2 x 8 bytes per shingle at peak."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    lengths = values.value_lengths().to_numpy(zero_copy_only=False)
    keys = np.repeat(np.arange(len(values), dtype=np.uint64), lengths)
    np.left_shift(keys, np.uint64(32), out=keys)
    np.bitwise_or(keys, values.flatten().to_numpy(), out=keys, casting="unsafe")
    keys.sort()  # in place; not np.unique, which is slow on uint64 in numpy 2.4
    if len(keys):
        keys = keys[np.concatenate([[True], keys[1:] != keys[:-1]])]
    starts = np.arange(len(values) + 1, dtype=np.uint64) << np.uint64(32)
    return keys, np.searchsorted(keys, starts)

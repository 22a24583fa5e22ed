"""Distinct values of numpy arrays by sorting, never by numpy's hash-based `np.unique`.

numpy 2.4's plain `np.unique` (no `return_*` argument) hashes, and on millions of 64-bit
keys that is 100x slower than sorting (2 s against 0.02 s for 2 million here); with a
`return_*` argument it still sorts. Barrier pieces and the decontamination index need
only sorted distinct values, which a sort and one comparison give exactly.
"""

from __future__ import annotations

import numpy as np


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted: `np.unique(values)` without the hash table."""
    return distinct_sorted(np.sort(values))


def distinct_sorted(values: np.ndarray) -> np.ndarray:
    """The distinct values of an already sorted array, in order."""
    if len(values) == 0:
        return values
    return values[np.concatenate([[True], values[1:] != values[:-1]])]


def unique_pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (a, b) pairs, sorted by a then b (`np.unique(axis=0)` sorts rows as
    structured values, about 5x slower on two uint64 columns)."""
    if not len(a):
        return a, b
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    keep = np.concatenate([[True], (a[1:] != a[:-1]) | (b[1:] != b[:-1])])
    return a[keep], b[keep]

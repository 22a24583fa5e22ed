"""The sort-based set helpers give exactly numpy's `np.unique` results."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from curate.sorted_sets import distinct_sorted, sorted_unique, unique_pairs

keys = st.lists(st.integers(0, 2**64 - 1), max_size=200).map(lambda v: np.array(v, np.uint64))


@given(keys)
def test_sorted_unique_is_np_unique(values: np.ndarray) -> None:
    assert np.array_equal(sorted_unique(values), np.unique(values))
    assert np.array_equal(distinct_sorted(np.sort(values)), np.unique(values))


@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 5)), max_size=200))
def test_unique_pairs_is_np_unique_of_rows(pairs: list[tuple[int, int]]) -> None:
    a = np.array([p[0] for p in pairs], np.uint64)
    b = np.array([p[1] for p in pairs], np.int64)
    got_a, got_b = unique_pairs(a, b)
    want = np.unique(np.stack([a, b.astype(np.uint64)], axis=1), axis=0) if pairs else None
    if want is None:
        assert len(got_a) == len(got_b) == 0
    else:
        assert np.array_equal(got_a, want[:, 0]) and np.array_equal(got_b, want[:, 1])

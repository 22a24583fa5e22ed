"""Fixed bin schemes: a value's bin depends on the value alone, and every bin has edges."""

from __future__ import annotations

import numpy as np
import pytest

from curate.stats.bins import LOG2, UNIT, Scheme, bin_counts, linear


def test_log2_bins_are_powers_of_two() -> None:
    values = np.array([0, 1, 2, 3, 4, 7, 8, 1023, 1024, 2**40 - 1, 2**40])
    assert LOG2.index(values).tolist() == [0, 1, 2, 2, 3, 3, 4, 10, 11, 40, 41]
    for v, i in zip(values.tolist(), LOG2.index(values).tolist(), strict=True):
        lo, hi = LOG2.edges(i)
        assert lo <= v < hi


def test_linear_bins_clip_at_the_ends_and_hold_hi_in_the_last() -> None:
    values = np.array([-0.5, 0.0, 0.049, 0.05, 0.5, 0.999, 1.0, 7.0, np.nan])
    assert UNIT.index(values).tolist() == [0, 0, 0, 1, 10, 19, 19, 19, 0]
    assert UNIT.edges(1) == pytest.approx((0.05, 0.10))
    scheme = linear(0, 20, 40)
    assert scheme.index(np.array([4.26])).tolist() == [8]


def test_schemes_round_trip_and_refuse_an_empty_range() -> None:
    for scheme in (LOG2, UNIT, linear(-1, 3, 8)):
        assert Scheme.from_dict(scheme.to_dict()) == scheme
    with pytest.raises(ValueError):
        linear(1, 1, 10)


def test_bin_counts_leave_empty_bins_out() -> None:
    assert bin_counts(np.array([1, 1, 5, 1000]), LOG2) == {1: 2, 3: 1, 10: 1}
    assert bin_counts(np.array([], dtype=np.int64), LOG2) == {}

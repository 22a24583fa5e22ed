"""Band keys: equal bands give equal keys; default bands and rows come from datasketch."""

from __future__ import annotations

import numpy as np
import pytest

from curate.minhash.lsh import band_keys, candidate_probability
from curate.stages.minhash_dedup import optimal_bands


def test_equal_bands_equal_keys_and_one_changed_value_changes_only_its_band() -> None:
    rng = np.random.default_rng(0)
    sig = rng.integers(0, 2**32, (3, 128), dtype=np.uint64).astype(np.uint32)
    sig[1] = sig[0]
    sig[1, 20] ^= 1  # band 2 of 9 x 13
    keys = band_keys(sig, 9, 13)
    assert keys.shape == (3, 9) and keys.dtype == np.uint64
    same = keys[0] == keys[1]
    assert same.tolist() == [i != 1 for i in range(9)]
    assert not (keys[2] == keys[0]).any()


def test_same_values_in_different_bands_give_different_keys() -> None:
    sig = np.zeros((1, 20), np.uint32)
    keys = band_keys(sig, 4, 5)
    assert len(set(keys[0].tolist())) == 4


@pytest.mark.parametrize(
    "threshold,expected", [(0.7, (14, 9)), (0.8, (9, 13)), (0.85, (8, 16)), (0.9, (5, 25))]
)
def test_equal_weights_reproduce_datasketch(threshold: float, expected: tuple[int, int]) -> None:
    assert optimal_bands(threshold, 128, 0.5) == expected


def test_recall_weighted_default_makes_threshold_pairs_candidates() -> None:
    bands, rows = optimal_bands(0.8, 128, 0.98)
    assert bands * rows <= 128
    assert candidate_probability(0.8, bands, rows) > 0.97
    assert candidate_probability(0.8, 9, 13) == pytest.approx(0.40, abs=0.01)

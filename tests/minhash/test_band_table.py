"""The precomputed LSH band shapes are datasketch's own (curate.minhash.band_table)."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import pytest
from datasketch.lsh import _optimal_param

from curate.minhash import band_table
from curate.stages.minhash_dedup import optimal_bands


def test_the_table_is_for_the_datasketch_installed() -> None:
    """A new datasketch: regenerate the table (or the stage asks datasketch, slower)."""
    assert version("datasketch") == band_table.DATASKETCH


@pytest.mark.parametrize("num_perm", sorted(band_table.BANDS))
def test_every_third_threshold_matches_datasketch(num_perm: int) -> None:
    shapes = band_table.BANDS[num_perm]
    assert len(shapes) == len(band_table.THRESHOLDS)
    for i in range(num_perm % 3, len(shapes), 3):  # a third of each row, a different third
        t = band_table.THRESHOLDS[i]
        b, r = _optimal_param(t, num_perm, 1 - band_table.FN_WEIGHT, band_table.FN_WEIGHT)
        assert shapes[i] == (b, r), (t, num_perm)


def test_cases_outside_the_table_ask_datasketch() -> None:
    assert band_table.known(0.8, 128, 0.98, band_table.DATASKETCH) == (17, 7)
    assert band_table.known(0.805, 128, 0.98, band_table.DATASKETCH) is None
    assert band_table.known(0.8, 100, 0.98, band_table.DATASKETCH) is None
    assert band_table.known(0.8, 128, 0.9, band_table.DATASKETCH) is None
    assert band_table.known(0.8, 128, 0.98, "0.0.1") is None
    expected = _optimal_param(0.805, 128, 1 - 0.98, 0.98)
    assert optimal_bands(0.805, 128, 0.98) == tuple(expected)


def test_the_band_shape_of_a_default_recipe_does_not_import_scipy() -> None:
    code = (
        "import sys\n"
        "from curate.stages.minhash_dedup import MinHashDedup, MinHashDedupParams\n"
        "stage = MinHashDedup(MinHashDedupParams(threshold=0.7))\n"
        "assert stage.band_shape() == (23, 5), stage.band_shape()\n"
        "stage.describe()\n"
        "assert 'scipy' not in sys.modules and 'datasketch.lsh' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

"""A user's stage written with polars, imported at module level as such code usually is.

Importing it starts nothing, but polars' thread pool, once used, deadlocks a forked
process: a run whose recipe names it starts its workers with a forkserver instead
(tests/test_interrupt.py uses it to cover that path, since curate's own stages import
polars only inside workers).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa

from curate.stages.base import FilterStage, StageParams


class KeepAllParams(StageParams):
    pass


class PolarsKeepAll(FilterStage[KeepAllParams]):
    """Keeps every document, counting their characters with polars on the way."""

    name = "polars_keep_all"
    Params = KeepAllParams

    def keep(self, batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray]:
        lengths = pl.from_arrow(batch.column("text")).str.len_chars().to_numpy()
        return lengths >= 0, np.full(batch.num_rows, None, dtype=object)

"""A user's own stages, referenced from recipes by dotted path (tests/test_custom_stage.py)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate.stages.base import FilterStage, MapStage, StageParams, StageResult


class DropKeywordParams(StageParams):
    keyword: str


class DropKeyword(FilterStage):
    """Drops documents that mention a keyword."""

    name = "drop_keyword"
    Params = DropKeywordParams

    def keep(self, batch: pa.RecordBatch) -> tuple[np.ndarray, list[str | None]]:
        text = batch.column(self.text_field)
        hit = pc.match_substring(text, self.params.keyword).to_numpy(zero_copy_only=False)  # type: ignore[attr-defined]
        return ~hit, ["mentions_keyword"] * batch.num_rows


class Upper(MapStage):
    name = "upper"
    Params = StageParams

    def process(self, batch: pa.RecordBatch) -> StageResult:
        i = batch.schema.get_field_index(self.text_field)
        return StageResult(
            batch.set_column(i, "text", pc.utf8_upper(batch.column(i))), changed=batch.num_rows
        )


class SlowParams(StageParams):
    seconds: float = 1.0


class Slow(MapStage):
    """Sleeps on every batch: keeps a build running while a test acts on it from outside."""

    name = "slow"
    Params = SlowParams

    def process(self, batch: pa.RecordBatch) -> StageResult:
        import time

        time.sleep(self.params.seconds)
        return StageResult(batch)

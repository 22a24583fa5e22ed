"""A user's own stages, referenced from recipes by dotted path (tests/test_custom_stage.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

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


class Stall(MapStage):
    """While CURATE_TEST_STALL names a folder, stalls in every partition but the one of ids
    `p0-*`, as a long call into native code would, leaving a `<pid>-<id>` file there first
    (tests/test_interrupt.py). Unset, it changes nothing, so the same recipe then resumes."""

    name = "stall"
    Params = StageParams

    def process(self, batch: pa.RecordBatch) -> StageResult:
        folder, first = os.environ.get("CURATE_TEST_STALL"), str(batch.column("id")[0])
        if folder and not first.startswith("p0-"):
            Path(folder, f"{os.getpid()}-{first}").touch()
            time.sleep(120)
        return StageResult(batch)

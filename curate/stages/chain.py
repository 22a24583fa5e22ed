"""A recipe's stages as objects, and the loop that runs map stages over a batch.

Both are written once here and used by every place that runs stages: the engines'
partition tasks, `Pipeline.process` and `inspect-filter`. So a stage is built, told its
position and counted the same way in a run, in a notebook and when tuning a filter.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate.errors import recipe_part
from curate.io.batches import CHANGED, ORDER
from curate.phases import mark
from curate.stage_params import StageParams
from curate.stages.base import MapStage, Stage, StageContext, StageCounts
from curate.stages.examples import attach


class StageEntry(Protocol):
    """One validated entry of a stage list (`curate.recipe.StageSpec`)."""

    @property
    def name(self) -> str: ...
    @property
    def params(self) -> StageParams: ...
    @property
    def stage_class(self) -> type[Stage]: ...


def build_stages(
    entries: Sequence[StageEntry],
    *,
    text_field: str,
    chat: bool,
    base_dir: str = ".",
    stats: bool = True,
    examples: int = 0,
) -> list[Stage]:
    """The stages of a list, each told its position (and whether to collect statistics);
    an error building one names its entry (`stages[i]`) when raised inside a recipe's
    `located()`."""
    stages = []
    for i, entry in enumerate(entries):
        with recipe_part("stages", i, entry.name):
            context = StageContext(
                text_field=text_field, position=i, base_dir=base_dir, chat=chat, stats=stats,
                examples=examples,
            )  # fmt: skip
            stages.append(entry.stage_class(entry.params, context))
    return stages


def run_maps(
    batch: pa.RecordBatch,
    stages: Sequence[MapStage],
    counts: Sequence[StageCounts],
    rejected: list[pa.Table],
) -> pa.RecordBatch:
    """The batch through each map stage in turn, adding to each stage's counts (in, out,
    changed, removed by reason, its own counters and statistics, seconds) and appending the
    rows a stage removed to `rejected`. A batch left empty goes no further: the stages after
    it are not called, so they count nothing for it."""
    for stage, c in zip(stages, counts, strict=True):
        if batch.num_rows == 0:
            break
        mark("map")
        t = time.perf_counter()
        result = stage.process(batch)
        c.docs_in += batch.num_rows
        c.docs_out += result.batch.num_rows
        c.changed += result.changed
        if result.removed is not None and result.removed.num_rows:
            c.removed.update(Counter(result.removed.column("reason").to_pylist()))
            removed = result.removed
            if stage.context.examples:  # the chosen few keep their text (curate.examples)
                removed = attach(stage, batch, removed, stage.context.examples)
            rejected.append(removed)
        if result.examples is not None and result.examples.num_rows:
            rejected.append(result.examples)  # travel with the removed rows, not counted
        if result.counters:  # a stage's own counts (StageResult.counters), summed
            c.counters.update(result.counters)
        c.observe(stage, batch, result)  # its statistics (curate.stats)
        if result.changed and CHANGED in batch.schema.names:  # lineage: which documents
            result.batch = mark_changed(batch, result.batch, stage)
        c.seconds += time.perf_counter() - t
        batch = result.batch
    return batch


def mark_changed(before: pa.RecordBatch, after: pa.RecordBatch, stage: Stage) -> pa.RecordBatch:
    """`after` with its `_changed` bit for the stage's position set on the documents whose text
    differs from what they were (rows matched by `_order`: the stage may have dropped some).
    Compared in C, and only for a stage that says it changed something; conversations (a
    list column) are not marked."""
    field = stage.text_field if stage.text_field in before.schema.names else None
    if field is None or ORDER not in before.schema.names or stage.context.position > 63:
        return after
    old, new = before.column(field), after.column(field)
    if after.num_rows != before.num_rows:
        old = pc.take(old, pc.index_in(after.column(ORDER), value_set=before.column(ORDER)))
    if not (pa.types.is_string(new.type) or pa.types.is_large_string(new.type)):
        return after
    differs = np.asarray(pc.fill_null(pc.not_equal(old, new), True), bool)
    at = after.schema.get_field_index(CHANGED)
    bits = np.asarray(after.column(at), np.uint64).copy()
    bits[differs] |= np.uint64(1) << np.uint64(stage.context.position)
    return after.set_column(at, after.schema.field(at), pa.array(bits, pa.uint64()))

"""`inspect-filter` on a barrier: the barrier run on the sample as if it were the corpus.

A barrier decides over every document, so on a sample it sees fewer repeats than the
corpus holds: what it removes there is a lower bound (a line in 3 of 1,000 sampled pages
may be in 3,000 of the million), and the report's title says so. What the sample still
shows well is *what kind* of text goes: the documents dropped, by reason, and for a
barrier that changes the documents it keeps (line_dedup) how many changed, its counters
(lines and characters removed) and changed documents before and after. Nothing is written.
"""

from __future__ import annotations

import pyarrow as pa

from curate.collective.local import LocalSummaries
from curate.io.batches import ID, ORDER, order_column
from curate.stages.base import REJECTED_SCHEMA, BarrierStage, StageResult, dropping, keeping

ON_SAMPLE = "(a barrier, on the sample alone: the corpus holds more repeats)"


def on_sample(target: BarrierStage, batch: pa.RecordBatch) -> StageResult:
    """The barrier's summarize, decide and apply over `batch` alone, as a map stage's
    result: the kept rows, changed, counters, and the rows it removed with their reasons."""
    if batch.num_rows == 0:
        return StageResult(batch)
    if ORDER not in batch.schema.names:
        order = pa.array(order_column(0, 0, batch.num_rows), pa.uint64())
        batch = batch.append_column(ORDER, order)
    summaries = LocalSummaries.from_tables([target.summarize(batch)])
    decision, _ = target.decide_with_stats(summaries)
    rows = decision.collect(target.decision_schema()).sort_by(ORDER)
    drops = dropping(rows)
    if target.changes_rows():
        fields = [ID, *(f.name for f in target.decision_fields)]
        result = target.apply(batch, drops.column(ID), keeping(rows).select(fields))
    else:
        result = target.apply(batch, drops.column(ID))
    result.removed = drops.select(REJECTED_SCHEMA.names)
    return result

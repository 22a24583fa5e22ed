"""exact_dedup: the first occurrence in input order survives, whatever the batching."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from curate.collective.local import LocalSummaries
from curate.stages.base import DECISION_SCHEMA, ORDER
from curate.stages.exact_dedup import ExactDedup, ExactDedupParams


def batch(ids: list[str], texts: list[str], orders: list[int]) -> pa.RecordBatch:
    return pa.record_batch(
        {"id": ids, "text": texts, ORDER: pa.array(np.array(orders, dtype=np.uint64))}
    )


def test_keeps_first_in_input_order_across_batches() -> None:
    stage = ExactDedup(ExactDedupParams())
    # the later batch is summarized first: order, not arrival, decides
    b2 = batch(["c", "d"], ["same", "other"], [(1 << 40) + 0, (1 << 40) + 1])
    b1 = batch(["a", "b"], ["x", "same"], [0, 1])
    summaries = LocalSummaries.from_tables([stage.summarize(b2), stage.summarize(b1)])
    decision = stage.decide(summaries).collect(DECISION_SCHEMA)
    rows = decision.select(["id", "reason", "duplicate_of", "similarity"]).to_pylist()
    assert rows == [{"id": "c", "reason": "duplicate", "duplicate_of": "b", "similarity": 1.0}]
    assert stage.apply(b2, decision.column("id")).batch.column("id").to_pylist() == ["d"]


def test_no_duplicates_no_decision() -> None:
    stage = ExactDedup(ExactDedupParams())
    b = batch(["a", "b"], ["x", "y"], [0, 1])
    assert stage.decide(LocalSummaries.from_tables([stage.summarize(b)])).count() == 0


def test_unicode_and_empty_texts_hash_as_bytes() -> None:
    stage = ExactDedup(ExactDedupParams())
    b = batch(["a", "b", "c", "d"], ["", "é", "", "e\u0301"], [0, 1, 2, 3])
    decision = stage.decide(LocalSummaries.from_tables([stage.summarize(b)])).collect(
        DECISION_SCHEMA
    )
    assert decision.column("id").to_pylist() == ["c"]

"""Exact duplicate removal: the same text twice keeps only its first occurrence in input order.

The key is a 128-bit xxh3 digest of the text's UTF-8 bytes (a collision among a
billion documents has probability about 1e-21). Put `normalize` before this stage
to make "the same text" mean "the same after normalization".

On chat records the digest is of the conversation's messages of the chosen `roles`
(default: all), each as its role and content (`curate.chat.contents.serialized`): two
conversations are duplicates only when those turns are equal, role, content and order.
A conversation with no message of those roles has nothing to compare and is kept.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from curate.arrow_text import utf8_slices
from curate.chat.contents import Roles, roles_field, serialized
from curate.collective.frame import Frame, Summaries
from curate.io.batches import ID, ORDER
from curate.stages.base import BarrierStage, StageParams, rejected_table

DIGEST = "digest"


class ExactDedupParams(StageParams):
    roles: Roles | None = roles_field()


class ExactDedup(BarrierStage[ExactDedupParams]):
    """Drops documents whose text equals an earlier document's, keeping the first in input order."""

    name = "exact_dedup"
    Params = ExactDedupParams
    reads = ("text",)
    shapes = ("text", "chat")

    def software(self) -> dict[str, str]:
        return {"xxhash": xxhash.VERSION, "hash": "xxh3_128"}

    def describe(self) -> dict[str, object]:
        return {"hash": "xxh3_128 of UTF-8 text", "keep": "first in input order"}

    def summarize(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        u = self.text_units(batch)
        texts = serialized(batch, u) if u.chat else u.texts
        digest = xxhash.xxh3_128_digest
        digests = pa.array([digest(t) for t in utf8_slices(texts)], pa.binary(16))
        summary = pa.record_batch(
            [batch.column(ID), batch.column(ORDER), digests], names=[ID, ORDER, DIGEST]
        )
        return summary.filter(pa.array(u.counts() > 0)) if u.chat else summary

    def decide(self, summaries: Summaries) -> Frame:
        return summaries.first_by_key(DIGEST).map(duplicates, self.name)


def duplicates(later: pa.Table, stage: str) -> pa.Table:
    """Decision rows for the later rows of each digest (one piece of them)."""
    n = later.num_rows
    table = rejected_table(
        stage,
        later.column("id"),
        ["duplicate"] * n,
        duplicate_of=later.column("first_id"),
        similarity=pc.cast(pa.array([1.0] * n), pa.float32()),
    )
    return table.append_column(ORDER, later.column(ORDER))

"""Removing lines (or paragraphs) that occur in more than N documents of the corpus.

Navigation bars, cookie notices, licence headers and generated footers repeat across
thousands of pages; Dolma's paragraph dedup and C4's repeated-span removal take them out
of the text and keep the document. This barrier does the same over the whole corpus:
each document's counted units (`curate.line_dedup.units`: lines or paragraphs, stripped,
blank ones never counted) are hashed in the first pass; the decision counts, for every
unit, the distinct documents holding it, through the engine's collective operations
(`curate.line_dedup.decide`), and a unit held by more than `max_documents` documents is
removed from all of them, or from all but its first occurrence in input order
(`keep_first`, the default: Dolma's and C4's "keep one copy"). Its `apply` changes text,
which is what `BarrierStage.decision_fields` is for.

A document left with no non-blank unit is dropped with reason `all_repeated` (like any
stage's removal: in rejected/, counted, and among the examples), rather than kept empty.
Counters and statistics: `lines_removed` (or `paragraphs_removed`) and `chars_removed`
(characters by which the kept documents shrank, plus the whole text of the dropped ones).

Text records only: on chat records a conversation's turns are not lines of one text
(the recipe check refuses it).
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash
from pydantic import Field

from curate.collective.frame import Frame, Summaries
from curate.io.batches import ID, ORDER
from curate.line_dedup import decide as pieces
from curate.line_dedup.units import counted, unit_hashes, without
from curate.progress import step
from curate.stages.base import (
    STATISTICS,
    BarrierStage,
    StageParams,
    StageResult,
)
from curate.stats import Stats


class LineDedupParams(StageParams):
    unit: Literal["line", "paragraph"] = Field(
        "line",
        description="What is compared and removed: lines, or paragraphs (text between "
        "blank lines).",
    )
    max_documents: int = Field(
        1,
        ge=1,
        description="Remove a unit held by more than this many distinct documents (1: any "
        "unit seen in two documents).",
    )
    keep_first: bool = Field(
        True,
        description="Keep a removed unit's first occurrence in input order (one copy "
        "stays, as Dolma and C4 do); false removes every occurrence.",
    )
    min_chars: int = Field(
        1,
        ge=1,
        description="Units shorter than this (stripped) are never counted nor removed: "
        "raise it for code, where '}' repeats everywhere.",
    )


class LineDedup(BarrierStage[LineDedupParams]):
    """Removes lines or paragraphs repeated across more than `max_documents` documents."""

    name = "line_dedup"
    Params = LineDedupParams
    reads = ("text",)
    shapes = ("text",)
    decision_fields = (pieces.REMOVE_FIELD,)

    def software(self) -> dict[str, str]:
        return {"xxhash": xxhash.VERSION, "hash": "xxh3_64"}

    def describe(self) -> dict[str, object]:
        return {
            "hash": "xxh3_64 of each stripped unit's UTF-8 text",
            "counts": "distinct documents per unit",
            "keep": "first occurrence in input order" if self.params.keep_first else "none",
        }

    def basis_params(self) -> dict[str, Any]:
        """The summary (each unit's hash) depends on how units are cut and counted only:
        tuning `max_documents` or `keep_first` reuses the cached summaries."""
        return {"unit": self.params.unit, "min_chars": self.params.min_chars}

    @property
    def _removed_counter(self) -> str:
        return f"{self.params.unit}s_removed"

    def summarize(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        hashes, nonblank = [], []
        for text in batch.column(self.text_field).to_pylist():
            h, n = unit_hashes(text or "", p.unit, p.min_chars)
            hashes.append(h)
            nonblank.append(n)
        return pa.record_batch(
            [
                batch.column(ID),
                batch.column(ORDER),
                pa.array(hashes, pa.list_(pa.uint64())),
                pa.array(nonblank, pa.uint32()),
            ],
            names=[ID, ORDER, pieces.HASHES, pieces.NONBLANK],
        )

    def decide(self, summaries: Summaries) -> Frame:
        return self.decide_with_stats(summaries)[0]

    def decide_with_stats(self, summaries: Summaries) -> tuple[Frame, dict[str, Any]]:
        p = self.params
        documents = summaries.count()
        units = int(sum(summaries.rows([pieces.HASHES]).fold(pieces.list_values)))
        per_doc = math.ceil(units * pieces.ROW_BYTES / documents) if documents else 0
        step(f"counting documents per {p.unit}: {units:,} {p.unit}s")
        remove = summaries.rows([pieces.HASHES, ORDER, pieces.NONBLANK]).group(
            pieces.HASH,
            pieces.repeated,
            p.max_documents,
            p.keep_first,
            prepare=(pieces.explode, ()),
            row_bytes=max(per_doc, 1),
        )
        removed = remove.count()
        repeated = int(sum(remove.fold(pieces.distinct_hashes)))
        step(f"gathering {removed:,} {p.unit}s to remove by document")
        decision = remove.by_partition(ORDER, pieces.per_document, self.name,
                                       self.decision_schema(), side=summaries.sources)  # fmt: skip
        stats: dict[str, Any] = {
            f"{p.unit}s_summarized": units,
            f"repeated_{p.unit}s": repeated,
            f"{p.unit}s_to_remove": removed,
        }
        if self.context.stats:
            figures = Stats()
            figures.count(f"repeated_{p.unit}s", repeated)
            stats[STATISTICS] = figures.to_dict()
        return decision, stats

    def apply(
        self, batch: pa.RecordBatch, drop_ids: pa.Array, changes: pa.Table | None = None
    ) -> StageResult:
        p = self.params
        removed_units = 0
        removed_chars = 0
        if len(drop_ids) and batch.num_rows:  # what the dropped documents held, counted too
            hit = pc.is_in(batch.column(ID), value_set=drop_ids)
            for text in batch.column(self.text_field).filter(hit).to_pylist():
                removed_units += counted(text or "", p.unit)
                removed_chars += len(text or "")
        kept = super().apply(batch, drop_ids).batch
        changed = 0
        if changes is not None and changes.num_rows and kept.num_rows:
            at = pc.index_in(kept.column(ID), value_set=changes.column(ID))
            rows = np.flatnonzero(at.is_valid().to_numpy(zero_copy_only=False))
            if len(rows):
                column = kept.column(self.text_field)
                which = at.to_numpy(zero_copy_only=False)
                lists = changes.column(pieces.REMOVE).combine_chunks()
                new = []
                for row in rows:
                    text = column[int(row)].as_py() or ""
                    drop = set(lists[int(which[row])].as_py() or ())
                    after, gone = without(text, p.unit, p.min_chars, drop)
                    removed_units += gone
                    removed_chars += len(text) - len(after)
                    new.append(after)
                mask = np.zeros(kept.num_rows, bool)
                mask[rows] = True
                values = pc.replace_with_mask(column, pa.array(mask), pa.array(new, column.type))
                kept = kept.set_column(
                    kept.schema.get_field_index(self.text_field),
                    kept.schema.field(self.text_field),
                    values,
                )
                changed = len(rows)
        counters = {self._removed_counter: removed_units, "chars_removed": removed_chars}
        counters = {k: v for k, v in counters.items() if v}
        stats = None
        if self.context.stats and counters:
            stats = Stats()
            for name, value in counters.items():
                stats.count(name, value)
        return StageResult(kept, changed=changed, counters=counters or None, stats=stats)

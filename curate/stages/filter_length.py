"""Dropping documents that are too short or too long, by characters or by words.

Words are runs of non-whitespace as Unicode defines whitespace (pyarrow's
`utf8_split_whitespace`), which is how Python's `str.split()` counts them too.

A conversation (chat records) is measured by the contents of its messages of the chosen
`roles` (default: all) joined by a blank line, and kept or removed whole.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, model_validator

from curate.chat.contents import Roles, roles_field
from curate.stages.base import FilterStage, StageParams
from curate.stats import LOG2, Stats


class FilterLengthParams(StageParams):
    min_chars: int | None = Field(None, ge=0, description="Drop documents with fewer characters.")
    max_chars: int | None = Field(None, ge=0, description="Drop documents with more characters.")
    min_words: int | None = Field(None, ge=0, description="Drop documents with fewer words.")
    max_words: int | None = Field(None, ge=0, description="Drop documents with more words.")
    roles: Roles | None = roles_field()

    @model_validator(mode="after")
    def _ordered(self) -> FilterLengthParams:
        for lo, hi in (("min_chars", "max_chars"), ("min_words", "max_words")):
            a, b = getattr(self, lo), getattr(self, hi)
            if a is not None and b is not None and a > b:
                raise ValueError(f"{lo} ({a}) is greater than {hi} ({b})")
        return self


class FilterLength(FilterStage[FilterLengthParams]):
    """Drops documents outside the character and word bounds (reasons: too_few_chars, ...)."""

    name = "filter_length"
    Params = FilterLengthParams
    reads = ("text",)
    shapes = ("text", "chat")

    def software(self) -> dict[str, str]:
        return {"pyarrow": pa.__version__}

    def describe(self) -> dict[str, object]:
        """The bounds in the order they judge a document (each sees what the earlier kept)."""
        p = self.params
        bounds = (("too_few_chars", p.min_chars), ("too_many_chars", p.max_chars),
                  ("too_few_words", p.min_words), ("too_many_words", p.max_words))  # fmt: skip
        return {"rules": [reason for reason, bound in bounds if bound is not None]}

    def keep(self, batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray]:
        return self.keep_with_stats(batch)[:2]

    def keep_with_stats(self, batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray, Stats]:
        """The bounds in order (characters, then words); each one's statistics count the
        documents the earlier ones kept: `rule/<reason>/evaluated`, and the histogram
        `rule/<reason>` (log2) of their characters or words with the bound marked."""
        p = self.params
        stats = Stats()
        text = self.document_texts(batch)
        n = batch.num_rows
        keep = np.ones(n, dtype=bool)
        reasons = np.full(n, None, dtype=object)
        checks: list[tuple[str, int | None, bool]] = [
            ("too_few_chars", p.min_chars, True),
            ("too_many_chars", p.max_chars, False),
            ("too_few_words", p.min_words, True),
            ("too_many_words", p.max_words, False),
        ]
        chars = words = None
        for reason, bound, is_min in checks:
            if bound is None:
                continue
            if "chars" in reason:
                if chars is None:
                    chars = pc.utf8_length(text).to_numpy(zero_copy_only=False)
                values = chars
            else:
                if words is None:
                    words = pc.list_value_length(pc.utf8_split_whitespace(text)).to_numpy(
                        zero_copy_only=False
                    )
                values = words
            if self.context.stats:
                judged = values[keep]
                judged = judged[~np.isnan(judged)] if judged.dtype.kind == "f" else judged
                stats.count(f"rule/{reason}/evaluated", int(keep.sum()))
                unit = "characters" if "chars" in reason else "words"
                stats.histogram(f"rule/{reason}", judged.astype(np.int64), LOG2, unit,
                                **{"min" if is_min else "max": bound})  # fmt: skip
            bad = (values < bound) if is_min else (values > bound)
            bad &= keep
            reasons[bad] = reason
            keep &= ~bad
        return keep, reasons, stats

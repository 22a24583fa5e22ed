"""A batch of documents with its words, lines and paragraphs, each split once.

Rules read these as flat, exploded columns: one row per word (or line), with the index
of its document, so that every statistic is a grouped aggregation (numpy's bincount or
a polars group-by) over the whole batch rather than a loop over documents.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from curate.quality import patterns
from curate.quality.words import WORD


@dataclass
class Pieces:
    """Strings exploded out of each document (words, lines): `doc` says whose."""

    values: pl.Series
    doc: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, lists: pl.Series, n_docs: int, strip: bool = False) -> Pieces:
        """`strip`: the pieces are words of `words.WORD`, some with a space in front."""
        counts = lists.list.len().fill_null(0).to_numpy().astype(np.int64)
        arrow = lists.to_arrow()
        if isinstance(arrow, pa.ChunkedArray):
            arrow = arrow.combine_chunks()
        values = pl.Series(arrow.flatten()) if len(arrow) else pl.Series([], dtype=pl.String)
        if strip and len(values):
            values = values.str.strip_chars()
        doc = np.repeat(np.arange(n_docs, dtype=np.int64), counts)
        return cls(values, doc, counts)

    @cached_property
    def lengths(self) -> np.ndarray:
        """Characters (code points) in each piece."""
        return self.values.str.len_chars().to_numpy().astype(np.int64)

    def per_doc(self, flags: np.ndarray | pl.Series, n_docs: int) -> np.ndarray:
        """How many pieces of each document have the flag (or the sum of a weight)."""
        w = flags.to_numpy() if isinstance(flags, pl.Series) else flags
        return np.bincount(self.doc, weights=w.astype(np.float64), minlength=n_docs)

    def first_occurrence(self) -> np.ndarray:
        """True where a piece is the first of its value within its document."""
        frame = pl.DataFrame({"d": self.doc, "v": self.values})
        return frame.select(pl.struct("d", "v").is_first_distinct()).to_series().to_numpy()


@dataclass(frozen=True)
class Measured:
    """What a threshold rule measured on each document, and the bound it holds it to: the
    statistics draw `values` with `threshold` marked (`curate.stats`)."""

    values: np.ndarray  # float64, one per document of the DocBatch (nan: not measured)
    bound: str  # "min": fails below threshold; "max": fails above it
    threshold: float
    kind: str  # "ratio" (0-1), "count" (words, a non-negative integer), "length" (characters)


class DocBatch:
    """Texts of one batch; words, lines and paragraphs are computed when first asked for."""

    def __init__(self, texts: pl.Series | pa.Array | pa.ChunkedArray) -> None:
        if not isinstance(texts, pl.Series):
            texts = pl.Series(texts)
        self.texts = texts.cast(pl.String).fill_null("")
        self.n = len(self.texts)
        self.measured: dict[str, Measured] = {}
        """rule -> what it measured, for the rules that compare a value with a threshold."""
        self.rewrite: Any = None
        """A rule set that removes lines (c4) leaves what it kept here (`c4.Rewrite`)."""

    def check(
        self, rule: str, values: np.ndarray, bound: str, threshold: float, kind: str = "ratio"
    ) -> np.ndarray:
        """Where `values` break the bound (`min`: below threshold; `max`: above it; nan
        breaks neither), remembering the values for the statistics."""
        v = np.asarray(values, dtype=np.float64)
        self.measured[rule] = Measured(v, bound, float(threshold), kind)
        with np.errstate(invalid="ignore"):
            return v < threshold if bound == "min" else v > threshold

    def subset(self, keep: np.ndarray) -> DocBatch:
        """The documents where `keep` is True, with the words already split carried over."""
        out = DocBatch(self.texts.filter(pl.Series(keep)))
        if "words" in self.__dict__:
            w: Pieces = self.__dict__["words"]
            index = np.cumsum(keep) - 1
            on = keep[w.doc]
            out.__dict__["words"] = Pieces(
                w.values.filter(pl.Series(on)), index[w.doc[on]], w.counts[keep]
            )
        return out

    @cached_property
    def chars(self) -> np.ndarray:
        return self.texts.str.len_chars().to_numpy().astype(np.int64)

    @cached_property
    def words(self) -> Pieces:
        """Words as the English word splitter makes them (punctuation marks included)."""
        return Pieces.of(self.texts.str.extract_all(WORD), self.n, strip=True)

    @cached_property
    def unified(self) -> pl.Series:
        """The texts with every `str.splitlines()` line break turned into "\\n"."""
        return self.texts.str.replace_all(patterns.LINE_BREAK, "\n")

    @cached_property
    def line_count(self) -> np.ndarray:
        """len(text.splitlines()): breaks, plus one when the text ends inside a line."""
        breaks = self.texts.str.count_matches(patterns.LINE_BREAK).to_numpy()
        tail = ~self.texts.str.contains(f"(?:{patterns.LINE_BREAK})$").to_numpy()
        return (breaks + (tail & (self.chars > 0))).astype(np.int64)

    @cached_property
    def nonblank_lines(self) -> Pieces:
        """Lines of `text.split("\\n")` that are not only whitespace, unstripped."""
        lines = self.texts.str.extract_all(r"[^\n]*\S[^\n]*")
        return Pieces.of(lines, self.n)

    def count(self, literal: str) -> np.ndarray:
        """Non-overlapping occurrences of a literal string, like `str.count`."""
        import re

        return self.texts.str.count_matches(re.escape(literal)).to_numpy().astype(np.int64)

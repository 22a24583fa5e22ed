"""The mergeable statistics a stage keeps per batch: integer sums and fixed-bin histograms.

Everything here is an integer count, added like a counter: merging is exact, commutative
and associative, so the statistics of a version do not depend on how many workers ran
it, in which order partitions finished, or whether a stage's output came from the stage
cache (which keeps them with its counts). No floating sum, no sample, no text: values
are binned (`curate.stats.bins`) and only the bins' counts are kept.

Names are plain strings; a `/` groups them (`rule/word_count`, `pii/EMAIL_ADDRESS/replace`).
The names built-in stages use are listed in README's "Statistics" section.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from curate.stats.bins import LOG2, Scheme, bin_counts


@dataclass
class Histogram:
    """Counts of values per bin of a fixed scheme, and what the bins measure.

    `total` is the exact sum of the values when they are integers (lengths, tokens), else
    None; `marks` are fixed values to draw on it (a filter's threshold), the same in every
    batch, and `unit` says what a value counts (characters, tokens, a score)."""

    scheme: Scheme = LOG2
    unit: str = ""
    counts: Counter[int] = field(default_factory=Counter)
    total: int | None = None
    marks: dict[str, float] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return sum(self.counts.values())

    def add_values(self, values: np.ndarray) -> None:
        values = np.asarray(values)
        self.counts.update(bin_counts(values, self.scheme))
        if np.issubdtype(values.dtype, np.integer):
            self.total = (self.total or 0) + int(values.sum(dtype=np.int64))

    def add(self, other: Histogram) -> None:
        if other.scheme != self.scheme:
            raise ValueError(f"cannot merge histograms of schemes {self.scheme} and {other.scheme}")
        self.counts.update(other.counts)
        if other.total is not None:
            self.total = (self.total or 0) + other.total
        for k, v in other.marks.items():
            self.marks.setdefault(k, v)
        if not self.unit:
            self.unit = other.unit

    def subtract(self, other: Histogram) -> None:
        """Take out what `other` added (the documents a rerun does not hold again:
        `curate.cache.by_document`); bins left empty go."""
        if other.scheme != self.scheme:
            raise ValueError(f"cannot merge histograms of schemes {self.scheme} and {other.scheme}")
        self.counts.subtract(other.counts)
        self.counts = Counter({k: v for k, v in self.counts.items() if v})
        if other.total is not None:
            self.total = (self.total or 0) - other.total

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"scheme": self.scheme.to_dict(), "unit": self.unit, "n": self.n}
        if self.total is not None:
            out["total"] = self.total
        if self.marks:
            out["marks"] = dict(sorted(self.marks.items()))
        out["bins"] = [[i, c] for i, c in sorted(self.counts.items()) if c]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Histogram:
        return cls(
            scheme=Scheme.from_dict(data["scheme"]),
            unit=data.get("unit", ""),
            counts=Counter({int(i): int(c) for i, c in data["bins"]}),
            total=data.get("total"),
            marks=dict(data.get("marks", {})),
        )


@dataclass
class Stats:
    """One stage's statistics for a batch, a partition or a whole run: sums and histograms."""

    sums: Counter[str] = field(default_factory=Counter)
    histograms: dict[str, Histogram] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.to_dict())

    def count(self, name: str, value: int) -> None:
        self.sums[name] += int(value)

    def histogram(
        self,
        name: str,
        values: np.ndarray,
        scheme: Scheme = LOG2,
        unit: str = "",
        **marks: float | None,
    ) -> Histogram:
        """Bin `values` into the histogram `name` (made with `scheme` on first use); `marks`
        (a threshold: `min=0.65`) are drawn on it, None ones left out."""
        h = self.histograms.get(name)
        if h is None:
            h = self.histograms[name] = Histogram(scheme, unit)
        h.marks.update({k: float(v) for k, v in marks.items() if v is not None})
        h.add_values(values)
        return h

    def histogram_of_counts(
        self,
        name: str,
        parts: list[tuple[dict[int, int], int | None]],
        scheme: Scheme,
        unit: str = "",
        **marks: float | None,
    ) -> Histogram:
        """Add bin counts made elsewhere (`curate.stats.bins.piece_bins`: per piece, the
        counts per bin and the values' sum or None) to the histogram `name`."""
        h = self.histograms.get(name)
        if h is None:
            h = self.histograms[name] = Histogram(scheme, unit)
        h.marks.update({k: float(v) for k, v in marks.items() if v is not None})
        for counts, total in parts:
            h.counts.update(counts)
            if total is not None:
                h.total = (h.total or 0) + total
        return h

    def add(self, other: Stats) -> None:
        self.sums.update(other.sums)
        for name, h in other.histograms.items():
            mine = self.histograms.get(name)
            if mine is None:
                mine = self.histograms[name] = Histogram(h.scheme, h.unit, marks=dict(h.marks))
            mine.add(h)

    def subtract(self, other: Stats) -> None:
        """Take out what `other` added (see `Histogram.subtract`)."""
        self.sums.subtract(other.sums)
        for name, h in other.histograms.items():
            mine = self.histograms.get(name)
            if mine is None:
                raise ValueError(f"cannot take histogram {name!r} out of statistics without it")
            mine.subtract(h)

    def to_dict(self) -> dict[str, Any]:
        """Sums that are 0 and histograms of no value are left out: the figures of a set of
        documents read the same however they were added up (`subtract` included)."""
        out: dict[str, Any] = {}
        sums = {k: v for k, v in sorted(self.sums.items()) if v}
        if sums:
            out["sums"] = sums
        histograms = {k: h.to_dict() for k, h in sorted(self.histograms.items()) if h.n}
        if histograms:
            out["histograms"] = histograms
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Stats:
        data = data or {}
        return cls(
            sums=Counter({k: int(v) for k, v in data.get("sums", {}).items()}),
            histograms={k: Histogram.from_dict(h) for k, h in data.get("histograms", {}).items()},
        )

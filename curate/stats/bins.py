"""Fixed bin schemes: a value's bin depends on the value alone, never on the data seen.

That is what makes a histogram mergeable and deterministic: two workers binning their
own documents, in any order, give counts whose sum is the histogram of all of them.
Each histogram names its scheme, so whoever draws it (a report, a dataset card) knows
every bin's edges without knowing the code:

- `log2` (lengths, tokens, sizes: non-negative integers): bin 0 holds 0; bin k >= 1
  holds [2**(k-1), 2**k), so bin 1 is 1, bin 2 is 2-3, bin 11 is 1024-2047.
- `linear` (scores, ratios, measures): `bins` bins of equal width between `lo` and `hi`;
  bin i holds [lo + i*w, lo + (i+1)*w), the last bin also holds `hi`; values below `lo`
  count in bin 0 and above `hi` in the last (so nothing is lost; the scheme says where
  the ends are clipped).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa


@dataclass(frozen=True)
class Scheme:
    """How values map to bins: `log2`, or `linear` with its range and bin count."""

    kind: str  # "log2" | "linear"
    lo: float = 0.0
    hi: float = 1.0
    bins: int = 0

    def to_dict(self) -> dict[str, Any]:
        if self.kind == LOG2.kind:
            return {"kind": self.kind}
        return {"kind": self.kind, "lo": self.lo, "hi": self.hi, "bins": self.bins}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Scheme:
        if data["kind"] == LOG2.kind:
            return LOG2
        return linear(float(data["lo"]), float(data["hi"]), int(data["bins"]))

    def edges(self, index: int) -> tuple[float, float]:
        """[lo, hi) of bin `index` (log2: integers; bin 0 is [0, 1))."""
        if self.kind == LOG2.kind:
            return (0, 1) if index == 0 else (2 ** (index - 1), 2**index)
        width = (self.hi - self.lo) / self.bins
        return (self.lo + index * width, self.lo + (index + 1) * width)

    def index(self, values: np.ndarray) -> np.ndarray:
        """The bin of each value (int64), vectorised."""
        if self.kind == LOG2.kind:
            v = np.asarray(values, dtype=np.float64)
            _, exponent = np.frexp(np.maximum(v, 0.0))  # v = m * 2**e, 0.5 <= m < 1: e = bits
            return np.where(v >= 1, exponent, 0).astype(np.int64)
        v = np.nan_to_num(np.asarray(values, dtype=np.float64), nan=self.lo)
        i = np.floor((v - self.lo) * (self.bins / (self.hi - self.lo)))
        return np.clip(i, 0, self.bins - 1).astype(np.int64)


LOG2 = Scheme("log2")
"""Lengths in characters, tokens per document, sizes: powers of two."""


def linear(lo: float, hi: float, bins: int) -> Scheme:
    """Equal-width bins between lo and hi (values outside counted in the end bins)."""
    if not hi > lo or bins < 1:
        raise ValueError(f"a linear scheme needs lo < hi and bins >= 1, not {lo}, {hi}, {bins}")
    return Scheme("linear", float(lo), float(hi), int(bins))


UNIT = linear(0.0, 1.0, 20)
"""Scores and ratios in [0, 1]: twenty bins of 0.05."""


def bin_counts(values: np.ndarray, scheme: Scheme) -> dict[int, int]:
    """How many values fall in each bin (bins holding none left out)."""
    idx = scheme.index(values)
    if idx.size == 0:
        return {}
    counts = np.bincount(idx)
    nonzero = np.flatnonzero(counts)
    return {int(i): int(counts[i]) for i in nonzero}


def piece_bins(table: pa.Table, column: str, scheme: Scheme) -> tuple[dict[int, int], int | None]:
    """`bin_counts` of one column of a table, and the column's sum when it holds integers
    (else None): a piece function a barrier's decision folds over the pieces the engine
    holds (values never leave the piece, only counts do)."""
    if table.num_rows == 0:
        return {}, None
    values = table.column(column).to_numpy()
    if values.dtype.kind == "f":
        return bin_counts(values[~np.isnan(values)], scheme), None
    return bin_counts(values, scheme), int(values.sum(dtype=np.int64))

"""A distribution from the statistics file drawn as bars, one per bin the file holds, with
its thresholds as vertical lines; two or more series (read and written, A and B) side by
side in each bin.

The bins are the file's fixed schemes (`curate.stats.bins`, documented in
`curate.stats.document`): `linear` bins are drawn where their values lie; `log2` bins
(bin 0 holds 0, bin k holds [2**(k-1), 2**k)) are drawn one unit wide at position k,
labelled by their lower edge, so a length distribution reads like a log axis. Each bar
is `mark-<plot>-<series>-<bin>`, each threshold `threshold-<plot>-<series>-<name>`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from curate.report.svg import COLORS, THRESHOLD, draw

if TYPE_CHECKING:
    from matplotlib.figure import Figure

WIDTH, HEIGHT = 4.6, 2.3
MARGINS = {"left": 0.14, "right": 0.97, "bottom": 0.2, "top": 0.88}  # fixed: a grid lines up
SERIES_COLORS = (*COLORS, "#55a868")


def _position(scheme: dict[str, Any], index: int) -> tuple[float, float]:
    """Where bin `index` is drawn: (left edge, width)."""
    if scheme["kind"] == "linear":
        width = (scheme["hi"] - scheme["lo"]) / scheme["bins"]
        return scheme["lo"] + index * width, width
    return index - 0.5, 1.0


def _at(scheme: dict[str, Any], value: float) -> float:
    """Where a value (a threshold) falls on the drawn axis."""
    if scheme["kind"] == "linear":
        return value
    return math.log2(value) + 0.5 if value >= 1 else value - 0.5


def _short(value: float) -> str:
    for size, suffix in ((1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")):
        if value >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def histogram(
    name: str, title: str, series: Sequence[tuple[str, dict[str, Any], int]], unit: str = ""
) -> str:
    """`series`: (label, histogram as the statistics file holds it, series number), drawn
    in that order; the number (a version's place in a comparison) names its marks."""
    scheme = series[0][1]["scheme"]

    def paint(figure: Figure) -> None:
        ax = figure.add_subplot()
        share = 0.9 / len(series)
        indexes: set[int] = set()
        thresholds: list[tuple[float, str]] = []
        for place, (label, h, s) in enumerate(series):
            color = SERIES_COLORS[s % len(SERIES_COLORS)]
            for index, count in h["bins"]:
                left, width = _position(h["scheme"], index)
                (bar,) = ax.bar(
                    left + width * (0.05 + place * share), count, width=width * share,
                    align="edge", color=color, label=label if index == h["bins"][0][0] else None,
                )  # fmt: skip
                bar.set_gid(f"mark-{name}-{s}-{index}")
                indexes.add(index)
            for mark, value in sorted(h.get("marks", {}).items()):
                x = _at(h["scheme"], value)
                line = ax.axvline(x, color=THRESHOLD, lw=1, ls="--")
                line.set_gid(f"threshold-{name}-{s}-{mark}")
                thresholds.append((x, f"{mark} {value:g}"))
        if scheme["kind"] != "linear" and indexes:
            ticks = list(range(min(indexes), max(indexes) + 1))
            step = -(-len(ticks) // 6)  # at most six labels
            ticks = ticks[::step]
            ax.set_xticks(
                [t - 0.5 for t in ticks], [_short(0 if t == 0 else 2 ** (t - 1)) for t in ticks]
            )
        lo, hi = ax.get_xlim()
        labelled: list[float] = []
        for x, text in sorted(thresholds):  # labelled on the side with room
            if any(abs(x - y) < 0.15 * (hi - lo) for y in labelled):
                continue  # close marks (a bucketed classifier's edges): one label, not a smear
            labelled.append(x)
            right = (x - lo) > 0.6 * (hi - lo)
            ax.annotate(
                text, (x, 1), xycoords=("data", "axes fraction"), xytext=(-2 if right else 2, -2),
                textcoords="offset points", va="top", ha="right" if right else "left",
                fontsize=7, color=THRESHOLD,
            )  # fmt: skip
        ax.set_title(title, loc="left")
        ax.set_ylabel("documents")
        if unit:
            ax.set_xlabel(unit)
        if len(series) > 1:
            ax.legend(frameon=False, fontsize=7)

    return draw(name, WIDTH, HEIGHT, paint, MARGINS)

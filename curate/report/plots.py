"""The report's plots: one function per kind of figure, each taking one version's facts
or two (a comparison draws them side by side in one axes, A then B).

Every mark a reader counts carries an id, `mark-<plot>-<series>-<category>`: series 0
is the first version, 1 the second; category is the bar's place in the plot's category
list (shared by both versions, so A's and B's bars for the same stage share it). A
version lacking a category (a stage only the other has) draws no bar for it. Thresholds
drawn on a distribution are `threshold-<plot>-<name>`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from curate.report.facts import Facts
from curate.report.svg import COLORS, draw

if TYPE_CHECKING:
    from matplotlib.figure import Figure

BAR_INCHES = 0.24  # height of one bar; a figure grows with its bars
WIDTH = 7.5


def funnel(versions: Sequence[Facts], name: str = "funnel-documents") -> str:
    """Documents left after each step: read, readable (not quarantined), each stage.
    `name` keeps two funnels' ids apart in one page (a notebook shows several)."""
    return _bars(
        name,
        "documents after each step",
        [{step.label: step.documents for step in v.funnel} for v in versions],
        [v.title for v in versions],
    )


def tokens(versions: Sequence[Facts]) -> str | None:
    """Tokens after each stage from the one that tokenized on (from the statistics; None
    when no version has them: not tokenized, or made without statistics)."""
    series = [
        {
            v.labels.get(s["position"], str(s["position"])): s["sums"]["tokens_out"]
            for s in (v.statistics or {}).get("stages", [])
            if "tokens_out" in s.get("sums", {})
        }
        for v in versions
    ]
    if not any(series):
        return None
    return _bars("funnel-tokens", "tokens after each step", series, [v.title for v in versions])


def removed(versions: Sequence[Facts]) -> str | None:
    """Documents each stage removed, per reason (None when no stage removed any)."""
    series = [{f"{stage}: {reason}": n for stage, reason, n in v.removed} for v in versions]
    if not any(series):
        return None
    return _bars(
        "removed", "documents removed, by stage and reason", series, [v.title for v in versions]
    )


def tallies(versions: Sequence[Facts]) -> str:
    """Each stage's own tallies from the manifest (documents per detected language, personal
    data values per entity type and action, documents per benchmark), one plot per stage
    that keeps any, in stage order; each figure names the stage position it draws per
    series (`data-stage-<series>`)."""
    by_label: dict[str, list[dict[str, Any] | None]] = {}
    for v, facts in enumerate(versions):
        for stage in facts.manifest["stages"]:
            if stage.get("counters"):
                label = facts.labels.get(stage["position"], str(stage["position"]))
                by_label.setdefault(label, [None] * len(versions))[v] = stage
    out = []
    for k, (label, stages) in enumerate(by_label.items()):
        series = [dict(s["counters"]) if s else {} for s in stages]
        svg = _bars(f"tallies-{k}", label, series, [v.title for v in versions])
        where = " ".join(f'data-stage-{i}="{s["position"]}"' for i, s in enumerate(stages) if s)
        out.append(f'<figure class="tallies" {where}>{svg}</figure>')
    return "".join(out)


def _bars(name: str, title: str, series: Sequence[dict[str, int]], labels: Sequence[str]) -> str:
    """Horizontal bars, one row per category (first at the top), one bar per series that
    has the category, each labelled with its count."""
    categories: list[str] = []
    for values in series:
        categories += [c for c in values if c not in categories]
    rows, width = len(categories), 0.8 / len(series)

    def paint(figure: Figure) -> None:
        ax = figure.add_subplot()
        for s, values in enumerate(series):
            offset = ((len(series) - 1) / 2 - s) * width  # A above B
            for c, category in enumerate(categories):
                if category not in values:
                    continue
                y = rows - 1 - c + offset
                (bar,) = ax.barh(y, values[category], height=width, color=COLORS[s])
                bar.set_gid(f"mark-{name}-{s}-{c}")
                ax.annotate(
                    f"{values[category]:,}", (values[category], y), xytext=(3, 0),
                    textcoords="offset points", va="center", fontsize=7,
                )  # fmt: skip
        ax.set_yticks(range(rows), list(reversed(categories)))
        ax.set_ylim(-0.6, rows - 0.4)
        ax.set_title(title, loc="left")
        ax.margins(x=0.12)
        if len(series) > 1:
            from matplotlib.patches import Patch

            handles = [Patch(color=COLORS[s], label=label) for s, label in enumerate(labels)]
            figure.legend(handles=handles, loc="outside upper right", ncols=2, frameon=False)

    return draw(name, WIDTH, 0.9 + BAR_INCHES * rows * max(1, len(series) * 0.75), paint)

"""Which distributions of the statistics file the report draws, and in what order.

One version: the length of documents as read and as written, tokens per document, then
per stage the length before and after (stages that changed text) and every histogram of
its own (a filter rule's measured value with its threshold; a rule judges only the
documents every earlier rule kept, and the caption says how many). Two versions: the
same figures with A and B as the two series, stages matched as the rest of the
comparison matches them. Plot ids are numbered in page order; each figure says which
stage and histogram it draws in `data-` attributes, so a test can check every bar.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from curate.report.histograms import histogram
from curate.report.markup import esc

GENERIC = ("length_in", "length_out", "tokens_out")
UNITS = {"length_in": "characters", "length_out": "characters", "tokens_out": "tokens"}


@dataclass(frozen=True)
class Figure:
    """One plot: its heading group, title, and per series the stage position and histogram
    name it draws (None where that series has none)."""

    group: str
    title: str
    series: tuple[tuple[str, int, str] | None, ...]  # (label, stage position, histogram)
    note: str = ""


def _histograms(stage: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = stage.get("histograms", {})
    return found


def _last_with(stages: list[dict[str, Any]], name: str) -> int | None:
    found = [s["position"] for s in stages if name in _histograms(s)]
    return found[-1] if found else None


def _title(name: str) -> str:
    return name[len("rule/") :] if name.startswith("rule/") else name.replace("_", " ")


def one(
    stats: dict[str, Any], label: dict[int, str], rules: dict[int, list[str]] | None = None
) -> list[Figure]:
    """`label`: each stage position's name in the page; `rules`: per stage, its rules in the
    order it applies them (the manifest's `details.rules`), which is the order drawn."""
    stages = stats["stages"]
    figures: list[Figure] = []
    written = _last_with(stages, "length_out")
    if stages and "length_in" in _histograms(stages[0]) and written is not None:
        series = (("read", 0, "length_in"), ("written", written, "length_out"))
        figures.append(Figure("Documents", "characters per document", series))
    tokens = _last_with(stages, "tokens_out")
    if tokens is not None:
        figures.append(
            Figure("Documents", "tokens per document", (("written", tokens, "tokens_out"),))
        )
    for s in stages:
        pos, own = s["position"], _histograms(s)
        if s.get("changed") and "length_in" in own and "length_out" in own:
            series = (("before", pos, "length_in"), ("after", pos, "length_out"))
            figures.append(Figure(label[pos], "characters per document", series))
        order = (rules or {}).get(pos, [])
        for name in sorted((n for n in own if n not in GENERIC), key=lambda n: _rank(n, order)):
            figures.append(Figure(label[pos], _title(name), (("", pos, name),), _note(s, name)))
    return figures


def _rank(name: str, order: list[str]) -> tuple[int, int, str]:
    """Rules in the order the stage applies them, then any other histogram by name."""
    rule = name[len("rule/") :]
    return (0, order.index(rule), "") if rule in order else (1, 0, name)


def _note(stage: dict[str, Any], name: str) -> str:
    judged = stage.get("sums", {}).get(f"{name}/evaluated")
    if judged is None:
        return ""
    return f"{judged:,} documents judged: those every earlier rule kept"


def both(
    stats: Sequence[dict[str, Any]],
    labels: Sequence[dict[int, str]],
    titles: Sequence[str],
    rules: Sequence[dict[int, list[str]]],
) -> list[Figure]:
    """Each version's figures, as one series per version: matched by group and title."""
    merged: dict[tuple[str, str], list[tuple[str, int, str] | None]] = {}
    notes: dict[tuple[str, str], str] = {}
    for v, (doc, label) in enumerate(zip(stats, labels, strict=True)):
        for f in one(doc, label, rules[v]):
            for series in f.series:
                if series is None or series[0] in ("read", "before"):
                    continue  # A against B: what came out, not what went in
                key = (f.group, f.title)
                slots = merged.setdefault(key, [None] * len(stats))
                slots[v] = (titles[v], series[1], series[2])
                notes.setdefault(key, f.note)
    return [Figure(g, t, tuple(s), notes[(g, t)]) for (g, t), s in merged.items()]


def render(figures: list[Figure], stats: Sequence[dict[str, Any]]) -> str:
    """The figures as a grid under one heading per group, in order."""
    out, group = [], None
    for k, f in enumerate(figures):
        if f.group != group:
            if group is not None:
                out.append("</div>")
            group = f.group
            out.append(f'<h3>{esc(group)}</h3><div class="grid">')
        series = [  # a comparison's series i is version i; one version's come from it alone
            (s[0], stats[i if len(stats) > 1 else 0]["stages"][s[1]]["histograms"][s[2]], i)
            for i, s in enumerate(f.series)
            if s is not None
        ]
        unit = next((h.get("unit", "") for _, h, _ in series if h.get("unit")), "")
        svg = histogram(f"dist-{k}", f.title, series, unit)
        where = " ".join(
            f'data-series-{i}="{s[1]}:{esc(s[2])}"' for i, s in enumerate(f.series) if s is not None
        )
        note = f"<figcaption>{esc(f.note)}</figcaption>" if f.note else ""
        out.append(f'<figure class="dist" {where}>{svg}{note}</figure>')
    if group is not None:
        out.append("</div>")
    return "".join(out)

"""What a report page must draw, counted from the version's own files: one bar per funnel
step, per reason a stage removed documents for, per tokenized stage, and per bin each
drawn histogram of the statistics file holds (with one line per threshold)."""

from __future__ import annotations

import re
from typing import Any

import curate
from curate.report.facts import statistics


def expected(version: curate.Version, series: int) -> dict[tuple[str, int], int]:
    """Bars per (plot, series) of the funnel, tokens and removal plots."""
    m = version.manifest
    reasons = sum(1 for s in m["stages"] for n in s["removed"].values() if n)
    out = {("funnel-documents", series): 2 + len(m["stages"]), ("removed", series): reasons}
    stats = statistics(version)
    if stats is not None:
        tokenized = sum(1 for s in stats["stages"] if "tokens_out" in s.get("sums", {}))
        out[("funnel-tokens", series)] = tokenized
    return out


def figures(page: str) -> list[tuple[str, dict[int, tuple[int, str]]]]:
    """Each distribution figure's plot name and, per series, the stage position and
    histogram it says it draws."""
    found = []
    for attrs, plot in re.findall(
        r'<figure class="dist" ([^>]*)><svg [^>]*id="plot-(dist-\d+)"', page
    ):
        series = {
            int(i): (int(pos), name.replace("&amp;", "&"))
            for i, pos, name in re.findall(r'data-series-(\d+)="(\d+):([^"]*)"', attrs)
        }
        found.append((plot, series))
    return found


def expected_histograms(
    page: str, versions: list[curate.Version]
) -> dict[tuple[str, int], tuple[int, int]]:
    """(plot, series) -> (bars, thresholds) the statistics hold for what each figure draws
    (a comparison's series i is version i; one version's series all come from it)."""
    docs = [statistics(v) for v in versions]
    out = {}
    for plot, series in figures(page):
        for i, (pos, name) in series.items():
            doc: Any = docs[i] if len(docs) > 1 else docs[0]
            h = doc["stages"][pos]["histograms"][name]
            out[(plot, i)] = (len(h["bins"]), len(h.get("marks", {})))
    return out


def expected_tallies(page: str, versions: list[curate.Version]) -> dict[tuple[str, int], int]:
    """(plot, series) -> bars of each stage-tallies figure: one per counter the stage kept."""
    out = {}
    for attrs, plot in re.findall(
        r'<figure class="tallies" ([^>]*)><svg [^>]*id="plot-(tallies-\d+)"', page
    ):
        for i, pos in re.findall(r'data-stage-(\d+)="(\d+)"', attrs):
            counters = versions[int(i)].manifest["stages"][int(pos)]["counters"]
            out[(plot, int(i))] = len(counters)
    return out

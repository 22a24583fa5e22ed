"""What `curate inspect-filter` shows of a classifier: the judged score's histogram over
the sample and the documents nearest the bounds on both sides, to choose a threshold by.

With several models the judged score is their combination (`column`); with no bound,
the examples are the lowest and highest scoring documents.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

BINS = 20
BAR = 40


@dataclass
class ScoreReport:
    column: str
    scores: np.ndarray
    min_score: float | None
    max_score: float | None
    edges: np.ndarray = field(default_factory=lambda: np.zeros(0))
    counts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    examples: dict[str, list[tuple[str, float, str]]] = field(default_factory=dict)
    """Per side ("below 0.5", "at or above 0.5", ...): (id, score, text), nearest first."""
    marks: list[float] = field(default_factory=list)
    """Other values drawn on the histogram (a bucketed classifier's edges)."""
    notes: list[str] = field(default_factory=list)
    """Lines under the first (the edges, and each bucket's share of the sample)."""

    def __str__(self) -> str:
        n = len(self.scores)
        if not n:
            return f"{self.column}: no documents scored"
        lines = [f"{self.column} over {n:,} documents: min {self.scores.min():.4g}, median "
                 f"{float(np.median(self.scores)):.4g}, max {self.scores.max():.4g}"]  # fmt: skip
        lines += self.notes
        bounds = [b for b in (self.min_score, self.max_score) if b is not None] + self.marks
        top = max(int(self.counts.max()), 1)
        for lo, hi, count in zip(self.edges[:-1], self.edges[1:], self.counts, strict=True):
            mark = (
                " <- " + ", ".join(f"{b:g}" for b in bounds if lo <= b < hi)
                if any(lo <= b < hi for b in bounds)
                else ""
            )
            bar = "#" * round(BAR * int(count) / top)
            lines.append(f"  [{lo:8.4g}, {hi:8.4g})  {int(count):>7,}  {bar}{mark}".rstrip())
        for side, found in self.examples.items():
            if not found:
                continue
            lines += ["", f"{side}:"]
            for doc_id, score, text in found:
                snippet = " ".join(text.split())
                snippet = snippet[:140] + ("…" if len(snippet) > 140 else "")
                lines.append(f"  {doc_id} ({score:.4g}): {snippet}")
        return "\n".join(lines)


@dataclass
class ScoreReports:
    """Several scores' reports (a classifier bucketing each model's score on its own)."""

    reports: list[ScoreReport]

    def __str__(self) -> str:
        return "\n\n".join(str(r) for r in self.reports)


def score_report(
    column: str,
    scores: np.ndarray,
    min_score: float | None,
    max_score: float | None,
    ids: list[str],
    texts: list[str],
    examples: int,
) -> ScoreReport:
    report = ScoreReport(column, scores, min_score, max_score)
    if not len(scores):
        return report
    _histogram(report)
    order = np.argsort(scores, kind="stable")

    def shown(rows: np.ndarray) -> list[tuple[str, float, str]]:
        return [(ids[i], float(scores[i]), texts[i]) for i in rows[:examples].tolist()]

    bounds = [(b, name) for b, name in ((min_score, "min_score"), (max_score, "max_score"))
              if b is not None]  # fmt: skip
    if not bounds:
        report.examples["lowest scores"] = shown(order)
        report.examples["highest scores"] = shown(order[::-1])
    for bound, name in bounds:
        below = order[scores[order] < bound][::-1]  # nearest the bound first
        above = order[scores[order] >= bound]
        report.examples[f"just below {name} {bound:g}"] = shown(below)
        report.examples[f"at or just above {name} {bound:g}"] = shown(above)
    return report


def _histogram(report: ScoreReport) -> None:
    scores = report.scores
    lo, hi = float(scores.min()), float(scores.max())
    if lo >= 0.0 and hi <= 1.00002:  # probabilities: the unit interval (fastText's 1.00001)
        lo, hi = 0.0, 1.0
    hi = hi if hi > lo else lo + 1.0
    clipped = np.clip(scores, lo, hi)
    report.counts, report.edges = np.histogram(clipped, bins=BINS, range=(lo, hi))


def bucket_report(
    column: str,
    scores: np.ndarray,
    weights: np.ndarray,
    cuts: list[float],
    edges: list[float],
    ids: list[str],
    texts: list[str],
    examples: int,
) -> ScoreReport:
    """A bucketed classifier's report: the histogram with the edges (found over the sample
    as if it were the corpus) marked, each bucket's documents and share of the weight, and
    for each edge the documents at or just below it (the lower bucket) and just above it
    (the upper), nearest first."""
    report = ScoreReport(column, scores, None, None, marks=list(edges))
    if not edges:
        report.notes.append("no percentile edges: the sample weighs nothing (all in bucket 0)")
    else:
        report.notes.append(
            "percentile edges over the sample (the corpus's differ): "
            + ", ".join(f"p{c:g} = {e:.4g}" for c, e in zip(cuts, edges, strict=True))
        )
        buckets = np.searchsorted(np.asarray(edges, np.float32), scores, side="left")
        total = max(int(weights.sum()), 1)
        ranges = [(f"{edges[b - 1]:.4g} < " if b else "") + "score"
                  + (f" <= {edges[b]:.4g}" if b < len(edges) else "")
                  for b in range(len(edges) + 1)]  # fmt: skip
        width = max(len(r) for r in ranges)
        for b, text in enumerate(ranges):
            inside = buckets == b
            share = int(weights[inside].sum()) / total
            report.notes.append(f"  bucket {b:>2}: {text:<{width}}  {int(inside.sum()):>7,} "
                                f"documents, {share:6.1%} of the weight")  # fmt: skip
    if not len(scores):
        return report
    _histogram(report)
    order = np.argsort(scores, kind="stable")
    ordered = scores[order]

    def shown(rows: np.ndarray) -> list[tuple[str, float, str]]:
        return [(ids[i], float(scores[i]), texts[i]) for i in rows[:examples].tolist()]

    for j, (cut, edge) in enumerate(zip(cuts, edges, strict=False)):
        below = order[ordered <= edge][::-1]
        above = order[ordered > edge]
        name = f"edge {j + 1} (p{cut:g} = {edge:.4g})"
        report.examples[f"at or just below {name}"] = shown(below)
        report.examples[f"just above {name}"] = shown(above)
    return report

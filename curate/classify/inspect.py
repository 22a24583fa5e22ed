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

    def __str__(self) -> str:
        n = len(self.scores)
        if not n:
            return f"{self.column}: no documents scored"
        lines = [f"{self.column} over {n:,} documents: min {self.scores.min():.4g}, median "
                 f"{float(np.median(self.scores)):.4g}, max {self.scores.max():.4g}"]  # fmt: skip
        bounds = [b for b in (self.min_score, self.max_score) if b is not None]
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
    lo, hi = float(scores.min()), float(scores.max())
    if lo >= 0.0 and hi <= 1.00002:  # probabilities: the unit interval (fastText's 1.00001)
        lo, hi = 0.0, 1.0
    hi = hi if hi > lo else lo + 1.0
    clipped = np.clip(scores, lo, hi)
    report.counts, report.edges = np.histogram(clipped, bins=BINS, range=(lo, hi))
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

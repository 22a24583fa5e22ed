"""`Frame` and `Summaries` where user barriers have always imported them from.

They live in `curate.collective.frame` now; this path stays so a barrier written against
it keeps working.
"""

from curate.collective.frame import Frame, PairScore, PieceFn, Prepare, Side, Summaries

__all__ = ["Frame", "PairScore", "PieceFn", "Prepare", "Side", "Summaries"]

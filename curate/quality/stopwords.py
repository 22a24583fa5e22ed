"""Gopher's stop words.

Rae et al. 2021, "Scaling Language Models: Methods, Analysis & Insights from Training
Gopher", appendix A.1.1: a document must contain at least two of these English words.
Matched case-sensitively against whole words, as the reference implementations do.
"""

GOPHER_STOP_WORDS: tuple[str, ...] = ("the", "be", "to", "of", "and", "that", "have", "with")

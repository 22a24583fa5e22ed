"""Gopher's quality rules.

Rae et al. 2021, "Scaling Language Models: Methods, Analysis & Insights from Training
Gopher" (arXiv:2112.11446), appendix A.1.1: keep a document of 50 to 100,000 words
whose mean word length is 3 to 10 characters, whose ratio of "#" and of ellipses to words
is at most 0.1 each, with at most 90% of lines starting with a bullet and at most 30%
ending with an ellipsis, with at least 80% of words containing a letter, and containing
at least two of the stop words. Those are the defaults here.

As in datatrove's GopherQualityFilter: words are the English word splitter's
(`curate.quality.words`); the word count and mean length leave out words made only of
punctuation or symbols; the ratios divide by all words; lines are `str.splitlines()`'s;
a bullet is "-" or "•" after leading whitespace; an ellipsis is "..." or "…".
"""

from __future__ import annotations

import numpy as np

from curate.quality import patterns
from curate.quality.docs import DocBatch
from curate.quality.params import GopherQualityParams

_LINE_WS = r"[\s&&[^\n]]*"


def evaluate(
    docs: DocBatch, p: GopherQualityParams, alive: np.ndarray, shortcut: bool = True
) -> list[tuple[str, np.ndarray]]:
    """(rule, fails) for each enabled rule, in datatrove's order."""
    words = docs.words
    n = docs.n
    symbol = words.values.str.contains(patterns.SYMBOL_WORD).to_numpy()
    n_words = words.counts.astype(np.float64)
    n_real = words.per_doc(~symbol, n)
    real_len = words.per_doc(np.where(symbol, 0, words.lengths), n)
    safe_words = np.maximum(n_words, 1)
    out: list[tuple[str, np.ndarray]] = []

    def rule(name: str, fails: np.ndarray) -> None:
        out.append((name, np.asarray(fails, dtype=bool)))

    def check(name: str, values: np.ndarray, bound: str, threshold: float, kind: str) -> None:
        rule(name, docs.check(name, values, bound, threshold, kind))

    if p.min_doc_words is not None:
        check("min_doc_words", n_real, "min", p.min_doc_words, "count")
    if p.max_doc_words is not None:
        check("max_doc_words", n_real, "max", p.max_doc_words, "count")
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = real_len / n_real  # nan without words: no comparison holds, as with np.mean([])
        if p.min_avg_word_length is not None:
            check("min_avg_word_length", mean, "min", p.min_avg_word_length, "length")
        if p.max_avg_word_length is not None:
            check("max_avg_word_length", mean, "max", p.max_avg_word_length, "length")
    if p.max_hash_word_ratio is not None:
        ratio = docs.count("#") / safe_words
        check("max_hash_word_ratio", ratio, "max", p.max_hash_word_ratio, "ratio")
    if p.max_ellipsis_word_ratio is not None:
        ellipses = docs.count("...") + docs.count("…")
        ratio = ellipses / safe_words
        check("max_ellipsis_word_ratio", ratio, "max", p.max_ellipsis_word_ratio, "ratio")
    lines = np.maximum(docs.line_count, 1)
    if p.max_bullet_lines_ratio is not None:
        bullets = docs.unified.str.count_matches(rf"(?m)^{_LINE_WS}[•\-]").to_numpy()
        check("max_bullet_lines_ratio", bullets / lines, "max", p.max_bullet_lines_ratio, "ratio")
    if p.max_ellipsis_lines_ratio is not None:
        ends = docs.unified.str.count_matches(rf"(?m)(?:\.\.\.|…){_LINE_WS}$").to_numpy()
        check("max_ellipsis_lines_ratio", ends / lines, "max", p.max_ellipsis_lines_ratio, "ratio")
    if p.min_alpha_words_ratio is not None:
        alpha = words.per_doc(words.values.str.contains(patterns.ALPHA).to_numpy(), n)
        ratio = alpha / safe_words
        check("min_alpha_words_ratio", ratio, "min", p.min_alpha_words_ratio, "ratio")
    if p.min_stop_words is not None:
        present = np.zeros(n, dtype=np.int64)
        is_stop = words.values.is_in(p.stop_words).to_numpy()
        stop_docs, stop_words = words.doc[is_stop], words.values.filter(is_stop)
        for w in set(p.stop_words):
            present += np.bincount(stop_docs[(stop_words == w).to_numpy()], minlength=n) > 0
        check("min_stop_words", present, "min", p.min_stop_words, "count")
    return out

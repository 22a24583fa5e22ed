"""FineWeb's additional rules.

Penedo et al. 2024, "The FineWeb Datasets: Decanting the Web for the Finest Text Data at
Scale" (arXiv:2406.17557), section 3.3 ("custom filters"): remove a document where at
most 12% of lines end with terminal punctuation, where more than 67% of lines are 30
characters or shorter, or where duplicated lines hold too many characters. The paper
states that last threshold as 0.1; the pipeline that made FineWeb (datatrove's
FineWebQualityFilter) uses 0.01, which is the default here. The pipeline also removes a
document with more than 0.3 newlines per word (list-like pages).

As in that filter: lines are the text split at "\\n", blank ones left out and the others
not stripped; terminal punctuation is any Sentence_Terminal mark; duplicated-line
characters divide by the text's characters other than newlines; words are the English
word splitter's. A document without a non-blank line fails (`empty`).
"""

from __future__ import annotations

import numpy as np

from curate.quality import patterns
from curate.quality.docs import DocBatch
from curate.quality.params import FineWebParams


def evaluate(
    docs: DocBatch, p: FineWebParams, alive: np.ndarray, shortcut: bool = True
) -> list[tuple[str, np.ndarray]]:
    n = docs.n
    lines = docs.nonblank_lines
    count = lines.counts
    safe = np.maximum(count, 1)
    out: list[tuple[str, np.ndarray]] = [("empty", count == 0)]
    if p.min_line_punct_ratio is not None:
        ends = lines.per_doc(lines.values.str.contains(patterns.TERMINAL_AT_END).to_numpy(), n)
        ratio = ends / safe
        judged = count > 0  # a document without lines, or (exclude_zero) none ending in
        if p.line_punct_exclude_zero:  # punctuation, is not held to the ratio
            judged &= ratio != 0
        ratio = np.where(judged, ratio, np.nan)
        fails = docs.check("min_line_punct_ratio", ratio, "min", p.min_line_punct_ratio)
        out.append(("min_line_punct_ratio", fails))
    if p.max_short_line_ratio is not None:
        short = lines.per_doc(lines.lengths <= p.short_line_length, n)
        fails = docs.check("max_short_line_ratio", short / safe, "max", p.max_short_line_ratio)
        out.append(("max_short_line_ratio", fails))
    newlines = docs.count("\n")
    if p.max_dup_line_char_ratio is not None:
        dup = ~lines.first_occurrence()
        dchars = lines.per_doc(np.where(dup, lines.lengths, 0), n)
        body = np.maximum(docs.chars - newlines, 1)
        ratio = dchars / body
        fails = docs.check("max_dup_line_char_ratio", ratio, "max", p.max_dup_line_char_ratio)
        out.append(("max_dup_line_char_ratio", fails))
    if p.max_newline_word_ratio is not None:
        words = np.maximum(docs.words.counts, 1)
        ratio = newlines / words
        fails = docs.check("max_newline_word_ratio", ratio, "max", p.max_newline_word_ratio)
        out.append(("max_newline_word_ratio", fails))
    return out

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
        fails = ratio < p.min_line_punct_ratio
        if p.line_punct_exclude_zero:
            fails &= ratio != 0
        out.append(("min_line_punct_ratio", fails & (count > 0)))
    if p.max_short_line_ratio is not None:
        short = lines.per_doc(lines.lengths <= p.short_line_length, n)
        out.append(("max_short_line_ratio", short / safe > p.max_short_line_ratio))
    newlines = docs.count("\n")
    if p.max_dup_line_char_ratio is not None:
        dup = ~lines.first_occurrence()
        dchars = lines.per_doc(np.where(dup, lines.lengths, 0), n)
        body = np.maximum(docs.chars - newlines, 1)
        out.append(("max_dup_line_char_ratio", dchars / body > p.max_dup_line_char_ratio))
    if p.max_newline_word_ratio is not None:
        words = np.maximum(docs.words.counts, 1)
        out.append(("max_newline_word_ratio", newlines / words > p.max_newline_word_ratio))
    return out

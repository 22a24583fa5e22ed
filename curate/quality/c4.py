"""C4's rules (the Colossal Clean Crawled Corpus).

Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a Unified
Text-to-Text Transformer" (JMLR 21), section 2.2, and the code that made C4
(TensorFlow Datasets, `c4_utils.clean_page`): look at each line, stripped; a line with a
word over 1,000 characters is dropped, citation marks ("[1]", "[edit]", "[citation
needed]") are removed, a line not ending in terminal punctuation (. ? ! " ', not "...")
or with fewer than 3 words is dropped, a line mentioning "javascript" or a cookie or
terms-of-use phrase is dropped; a page with "lorem ipsum" or a curly bracket in a line
that got that far is removed, and so is one left with fewer than 5 sentences. Those are
the defaults here.

This stage only decides: a kept document keeps all its lines (datatrove's C4QualityFilter
also rewrites the text to the kept lines). Sentences are counted as spaCy's sentencizer
counts them on each kept line, over the English word splitter's words: a new sentence
starts at a word that is not punctuation after a Sentence_Terminal mark.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from curate.quality import patterns
from curate.quality.docs import DocBatch, Pieces
from curate.quality.params import C4Params
from curate.quality.words import WORD

CITATION = r"\[\d*\]|\[edit\]|\[citation needed\]"
POLICY_PHRASES = (
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
)


def evaluate(
    docs: DocBatch, p: C4Params, alive: np.ndarray, shortcut: bool = True
) -> list[tuple[str, np.ndarray]]:
    n = docs.n
    lines = Pieces.of(docs.unified.str.split("\n"), n)
    line = lines.values.str.strip_chars()
    keep = np.ones(len(line), dtype=bool)
    if p.max_word_length is not None:
        keep &= ~line.str.contains(rf"\S{{{p.max_word_length + 1}}}").to_numpy()
    if p.remove_citations:
        line = line.str.replace_all(CITATION, "")
    if p.terminal_punct:
        ends = line.str.contains(r"[.?!\"']$") & ~line.str.ends_with("...")
        keep &= ends.to_numpy()
    if p.min_words_per_line is not None:
        words = lines.values.str.count_matches(r"\S+").to_numpy()
        keep &= words >= p.min_words_per_line
    keep &= alive[lines.doc]
    idx = np.flatnonzero(keep)
    kept = line.gather(idx)
    doc = lines.doc[idx]
    lower = kept.str.to_lowercase()
    out: list[tuple[str, np.ndarray]] = []
    if p.lorem_ipsum:
        hit = lower.str.contains("lorem ipsum", literal=True).to_numpy()
        out.append(("lorem_ipsum", np.bincount(doc[hit], minlength=n) > 0))
    skip = np.zeros(len(kept), dtype=bool)
    if p.javascript:
        skip |= lower.str.contains("javascript", literal=True).to_numpy()
    if p.curly_bracket:
        hit = kept.str.contains("{", literal=True).to_numpy() & ~skip
        out.append(("curly_bracket", np.bincount(doc[hit], minlength=n) > 0))
    if p.policy:
        skip |= lower.str.contains("|".join(POLICY_PHRASES)).to_numpy()
    if p.min_sentences is not None:
        dropped = np.logical_or.reduce([f for _, f in out]) if (out and shortcut) else 0
        counted = ~skip & ~np.asarray(dropped, dtype=bool)[doc] if shortcut and out else ~skip
        sentences = _sentences(kept.filter(counted), doc[counted], n)
        fails = docs.check("min_sentences", sentences, "min", p.min_sentences, "count")
        out.append(("min_sentences", fails))
    return out


def _sentences(lines: pl.Series, doc: np.ndarray, n_docs: int) -> np.ndarray:
    """Sentences per document, summed over its lines, as spaCy's sentencizer counts them."""
    words = Pieces.of(lines.str.extract_all(WORD), len(lines), strip=True)
    mark = words.values.str.contains(patterns.SENTENCE_MARK).to_numpy()
    punct = words.values.str.contains(patterns.PUNCT_WORD).to_numpy()
    marks_upto = np.cumsum(mark)  # marks among words [0, i]
    line_start = np.cumsum(words.counts) - words.counts
    solid = np.flatnonzero(~punct)
    solid_line = words.doc[solid]
    prev = np.empty_like(solid)
    if len(solid):
        prev[0] = -1
        prev[1:] = solid[:-1]
        first_in_line = np.ones(len(solid), dtype=bool)
        first_in_line[1:] = solid_line[1:] != solid_line[:-1]
        prev[first_in_line] = line_start[solid_line[first_in_line]] - 1
    before = np.where(solid > 0, marks_upto[np.maximum(solid - 1, 0)], 0)
    at_prev = np.where(prev >= 0, marks_upto[np.maximum(prev, 0)], 0)
    starts = (before - at_prev) > 0
    per_line = (words.counts > 0).astype(np.int64)
    per_line += np.bincount(solid_line[starts], minlength=len(lines)).astype(np.int64)
    return np.bincount(doc, weights=per_line, minlength=n_docs).astype(np.int64)

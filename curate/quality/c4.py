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

By default (`remove_lines`) the rule set also does what C4 did to the pages it kept, and
what datatrove's C4QualityFilter does: a kept document's text becomes its kept lines
(stripped, citation marks removed) joined by "\n", the whole stripped, and the rule sets
after it (FineWeb) judge that text (`Rewrite`, which also counts the lines each line rule
removed). `remove_lines: false` only decides. Sentences are counted as spaCy's
sentencizer counts them on each kept line, over the English word splitter's words: a new
sentence starts at a word that is not punctuation after a Sentence_Terminal mark.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

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


LINE_RULES = ("max_word_length", "terminal_punct", "min_words_per_line", "javascript", "policy")
"""The rules that remove a line (not a document), in the order a line is looked at: a
removed line is counted under the first it fails."""


@dataclass(frozen=True)
class Rewrite:
    """What line removal leaves of each document of a batch (documents the rule set did
    not look at, or removed, have whatever lines were left: only kept ones matter)."""

    texts: pl.Series
    """The kept lines, citation marks removed, joined by "\\n" and stripped ("" if none)."""
    removed: dict[str, np.ndarray]
    """Line rule -> lines of each document it removed (int64, one per document)."""
    citations: np.ndarray
    """Citation marks removed from each document's kept lines."""


def evaluate(
    docs: DocBatch, p: C4Params, alive: np.ndarray, shortcut: bool = True
) -> list[tuple[str, np.ndarray]]:
    """The document rules' verdicts; with `remove_lines`, `docs.rewrite` is set too."""
    n = docs.n
    lines = Pieces.of(docs.unified.str.split("\n"), n)
    raw = lines.values.str.strip_chars()
    why = np.zeros(len(raw), dtype=np.int8)  # 0: kept; k: LINE_RULES[k - 1] removed it

    def drop(rule: str, hit: np.ndarray) -> None:
        why[(why == 0) & hit] = LINE_RULES.index(rule) + 1

    if p.max_word_length is not None:
        drop("max_word_length", raw.str.contains(rf"\S{{{p.max_word_length + 1}}}").to_numpy())
    line = raw.str.replace_all(CITATION, "") if p.remove_citations else raw
    if p.terminal_punct:
        ends = line.str.contains(r"[.?!\"']$") & ~line.str.ends_with("...")
        drop("terminal_punct", ~ends.to_numpy())
    if p.min_words_per_line is not None:
        words = lines.values.str.count_matches(r"\S+").to_numpy()
        drop("min_words_per_line", words < p.min_words_per_line)
    idx = np.flatnonzero((why == 0) & alive[lines.doc])
    kept = line.gather(idx)
    doc = lines.doc[idx]
    lower = kept.str.to_lowercase()
    out: list[tuple[str, np.ndarray]] = []
    if p.lorem_ipsum:
        hit = lower.str.contains("lorem ipsum", literal=True).to_numpy()
        out.append(("lorem_ipsum", np.bincount(doc[hit], minlength=n) > 0))
    skip = np.zeros(len(kept), dtype=bool)
    if p.javascript:
        js = lower.str.contains("javascript", literal=True).to_numpy()
        why[idx[js]] = LINE_RULES.index("javascript") + 1
        skip |= js
    if p.curly_bracket:
        hit = kept.str.contains("{", literal=True).to_numpy() & ~skip
        out.append(("curly_bracket", np.bincount(doc[hit], minlength=n) > 0))
    if p.policy:
        policy = lower.str.contains("|".join(POLICY_PHRASES)).to_numpy() & ~skip
        why[idx[policy]] = LINE_RULES.index("policy") + 1
        skip |= policy
    if p.min_sentences is not None:
        dropped = np.logical_or.reduce([f for _, f in out]) if (out and shortcut) else 0
        counted = ~skip & ~np.asarray(dropped, dtype=bool)[doc] if shortcut and out else ~skip
        sentences = _sentences(kept.filter(counted), doc[counted], n)
        fails = docs.check("min_sentences", sentences, "min", p.min_sentences, "count")
        out.append(("min_sentences", fails))
    if p.remove_lines:
        citations = np.zeros(n, dtype=np.int64)
        if p.remove_citations:
            marks = raw.gather(idx[~skip]).str.count_matches(CITATION).to_numpy()
            citations = np.bincount(doc[~skip], marks, minlength=n).astype(np.int64)
        docs.rewrite = _rewrite(kept.filter(~skip), doc[~skip], n, lines.doc, why, citations)
    return out


def _rewrite(
    kept: pl.Series,
    doc: np.ndarray,
    n: int,
    line_doc: np.ndarray,
    why: np.ndarray,
    citations: np.ndarray,
) -> Rewrite:
    """Each document's kept lines joined by "\\n", stripped, and the lines each rule removed."""
    counts = np.bincount(doc, minlength=n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    values = kept.to_arrow()
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    per_doc = pa.LargeListArray.from_arrays(pa.array(offsets), values.cast(pa.large_string()))
    texts = pc.utf8_trim_whitespace(pc.binary_join(per_doc, pa.scalar("\n", pa.large_string())))
    removed = {
        rule: np.bincount(line_doc[why == k + 1], minlength=n).astype(np.int64)
        for k, rule in enumerate(LINE_RULES)
    }
    return Rewrite(pl.Series(texts).cast(pl.String), removed, citations)


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

"""Gopher's repetition rules.

Rae et al. 2021 (arXiv:2112.11446), appendix A.1.1 and table A1: remove a document whose
duplicated lines or paragraphs are more than 30% of its lines or paragraphs, or hold
more than 20% of its characters; whose most frequent 2-, 3- or 4-gram covers more than
20%, 18% or 16% of its characters; or whose duplicated 5- to 10-grams cover more than
15%, 14%, 13%, 12%, 11% or 10% of them. Those are the defaults here.

As in datatrove's GopherRepetitionFilter: paragraphs are the stripped text split at
runs of two or more newlines, lines the text split at runs of newlines; an element is
duplicated when an equal one came before it in the document; character fractions divide
by the whole text's length; n-grams are of the English word splitter's words, the top
n-gram measured as its words joined by spaces times its count, duplicated n-grams by
datatrove's left-to-right scan (`curate.quality.ngrams`). An empty text fails.
"""

from __future__ import annotations

import numpy as np

from curate.quality.docs import DocBatch, Pieces
from curate.quality.ngrams import NGrams, Rolling, duplicated_ngram_chars, top_ngram_chars
from curate.quality.params import GopherRepetitionParams


def _duplicates(pieces: Pieces, n_docs: int) -> tuple[np.ndarray, np.ndarray]:
    """Per document: how many pieces repeat an earlier one, and their characters."""
    dup = ~pieces.first_occurrence()
    return pieces.per_doc(dup, n_docs), pieces.per_doc(np.where(dup, pieces.lengths, 0), n_docs)


def evaluate(
    docs: DocBatch, p: GopherRepetitionParams, alive: np.ndarray, shortcut: bool = True
) -> list[tuple[str, np.ndarray]]:
    """(rule, fails) for each enabled rule, in datatrove's order.

    n-grams are counted only for documents still alive; with `shortcut`, also only for
    those no earlier rule failed (the verdict is the same, the work much smaller).
    """
    n = docs.n
    chars = np.maximum(docs.chars, 1).astype(np.float64)
    out: list[tuple[str, np.ndarray]] = [("empty", docs.chars == 0)]

    if p.dup_para_frac is not None or p.dup_para_char_frac is not None:
        paras = Pieces.of(docs.texts.str.strip_chars().str.extract_all(r"[^\n]+(?:\n[^\n]+)*"), n)
        count, dchars = _duplicates(paras, n)
        if p.dup_para_frac is not None:
            frac = count / np.maximum(paras.counts, 1)
            out.append(("dup_para_frac", docs.check("dup_para_frac", frac, "max", p.dup_para_frac)))
        if p.dup_para_char_frac is not None:
            frac = dchars / chars
            fails = docs.check("dup_para_char_frac", frac, "max", p.dup_para_char_frac)
            out.append(("dup_para_char_frac", fails))

    if p.dup_line_frac is not None or p.dup_line_char_frac is not None:
        lines = Pieces.of(docs.texts.str.extract_all(r"[^\n]+"), n)
        count, dchars = _duplicates(lines, n)
        # re.split("\n+") also yields "" before a leading and after a trailing newline
        lead = docs.texts.str.starts_with("\n").to_numpy()
        trail = docs.texts.str.ends_with("\n").to_numpy()
        total = lines.counts + lead + trail
        count = count + (lead & trail)
        if p.dup_line_frac is not None:
            frac = count / np.maximum(total, 1)
            out.append(("dup_line_frac", docs.check("dup_line_frac", frac, "max", p.dup_line_frac)))
        if p.dup_line_char_frac is not None:
            frac = dchars / chars
            fails = docs.check("dup_line_char_frac", frac, "max", p.dup_line_char_frac)
            out.append(("dup_line_char_frac", fails))

    if not p.top_ngram_char_frac and not p.dup_ngram_char_frac:
        return out
    if shortcut:
        alive = alive & ~np.logical_or.reduce([f for _, f in out])
    rolling = Rolling(docs.words)
    total = len(rolling.hashes)
    for size, frac in sorted(p.top_ngram_char_frac.items()):
        top = top_ngram_chars(NGrams(rolling, size, alive), n)
        name = f"top_{size}gram_char_frac"
        fails = docs.check(name, np.where(alive, top / chars, np.nan), "max", frac)
        out.append((name, fails))
        alive = alive & ~fails if shortcut else alive
    for size, frac in sorted(p.dup_ngram_char_frac.items()):
        grams = NGrams(rolling, size, alive)
        dup = duplicated_ngram_chars(grams, n, total, limit=frac * chars)
        name = f"dup_{size}gram_char_frac"
        fails = docs.check(name, np.where(alive, dup / chars, np.nan), "max", frac)
        out.append((name, fails))
        alive = alive & ~fails if shortcut else alive
    return out

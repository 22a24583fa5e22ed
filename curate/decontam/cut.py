"""Cutting matched n-grams out of a document, for `decontaminate: {action: cut}`.

Only documents with a match come here, one by one: their words are found again in
Python with the same definition (punctuation and symbols as spaces, `str.split()`
words), which keeps character positions, so each matched n-gram maps back to the span
of the original text from its first word's start to its last word's end.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from functools import lru_cache

import numpy as np

_WORD = re.compile(r"\S+")


@lru_cache(maxsize=1)
def _punct_to_space() -> dict[int, str]:
    return {c: " " for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c))[0] in "PS"}


def word_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _WORD.finditer(text.translate(_punct_to_space()))]


def cut(text: str, first_words: np.ndarray, n: int, words: int) -> str | None:
    """The text without the n-grams starting at `first_words`; None if the words do not line up
    with the vectorised count (`words`), so that the caller drops the document instead."""
    spans = word_spans(text)
    if len(spans) != words:
        return None
    marks = np.zeros(len(spans) + 1, np.int64)
    np.add.at(marks, first_words, 1)
    np.add.at(marks, first_words + n, -1)
    covered = np.concatenate([[0], (np.cumsum(marks[:-1]) > 0).astype(np.int8), [0]])
    edges = np.diff(covered)
    pieces, start = [], 0
    for first, last in zip(
        np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1, strict=True
    ):
        pieces.append(text[start : spans[first][0]])
        start = spans[last][1]
    pieces.append(text[start:])
    # pieces left with punctuation only ("!" after a cut sentence) go too
    table = _punct_to_space()
    return "\n".join(p.strip() for p in pieces if p.translate(table).strip())

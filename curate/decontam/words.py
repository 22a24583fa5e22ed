"""Normalized words and word n-gram keys of a batch, the way decontamination compares text.

The normalization of the published decontamination methods (GPT-3's, and the n-gram
overlap checks after it): lowercase (Python's `str.lower()`), every punctuation mark or
symbol (Unicode categories P* and S*) becomes a space, and words are what `str.split()`
then finds. An n-gram is n consecutive words of one document.

Vectorised over the batch's UTF-8 bytes: ASCII punctuation is folded with a byte table,
other punctuation with one regex over only the documents that have non-ASCII text; word
bounds and word hashes (xxh32 of each word's bytes) come from `curate.minhash`; an
n-gram's 64-bit key mixes its n word hashes. Keys are compared only within one run
(the benchmark set is built by the same code in every worker), never stored.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate.minhash.hashes import ranges_hashes
from curate.minhash.shingles import lowercase, utf8_buffer, words
from curate.minhash.xxh32 import PAD

_FOLD = np.arange(256, dtype=np.uint8)
_FOLD[[c for c in range(128) if chr(c) in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"]] = ord(" ")
_FOLD[ord("A") : ord("Z") + 1] += 32  # ASCII lowercase
_NON_ASCII_PUNCT = r"[\p{P}\p{S}&&[^\x00-\x7f]]"
_MUL = np.uint64(0x9E3779B97F4A7C15)
_MIX = np.uint64(0xBF58476D1CE4E5B9)


@dataclass
class Words:
    """Every normalized word of a batch: its hash and document, with counts per document."""

    hashes: np.ndarray  # uint64 (xxh32 values)
    counts: np.ndarray  # int64 per document

    @property
    def starts(self) -> np.ndarray:
        return np.cumsum(self.counts) - self.counts


def fold(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Texts with non-ASCII characters lowercased and their punctuation and symbols turned
    into spaces (ASCII letters and punctuation are left to the byte table)."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks else pa.array([], pa.string())
    texts = pc.fill_null(texts, "")
    other = pc.invert(pc.string_is_ascii(texts))
    if pc.any(other).as_py():  # ASCII text is lowercased and folded by the byte table
        import polars as pl

        rest = lowercase(pc.filter(texts, other))
        rest = pl.Series(rest).str.replace_all(_NON_ASCII_PUNCT, " ").to_arrow()
        texts = pc.replace_with_mask(texts, other, rest.cast(texts.type))
    return texts


def normalized_words(texts: pa.Array | pa.ChunkedArray) -> Words:
    data, offsets = utf8_buffer(fold(texts))
    data = _FOLD[data]  # ASCII punctuation -> space (UTF-8 continuation bytes are >= 0x80)
    starts, ends, counts, _ = words(data, offsets)
    buffer = np.concatenate([data, np.zeros(PAD, np.uint8)])
    hashes = ranges_hashes(buffer, starts, ends - starts, short=True).astype(np.uint64)
    return Words(hashes, counts.astype(np.int64))


def _window(h: np.ndarray, n: int) -> np.ndarray:
    """sum(h[i + j] * MUL**(n - 1 - j)) for every window, by doubling (log n passes)."""
    if n == 1:
        return h
    half = _window(h, n // 2)
    m = n // 2
    both = half[: len(half) - m] * (_MUL ** np.uint64(m)) + half[m:]  # windows of 2 * (n // 2)
    if n % 2:
        both = both[: len(both) - 1] * _MUL + h[2 * m :]
    return both


def ngram_keys(w: Words, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Keys of every n-gram and the index of its first word (documents never straddled)."""
    total = len(w.hashes)
    if total < n:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    doc = np.repeat(np.arange(len(w.counts)), w.counts)
    pos = np.arange(total - n + 1, dtype=np.int64)
    ok = pos + n <= (w.starts + w.counts)[doc[: len(pos)]]
    pos = pos[ok]
    key = _window(w.hashes, n)[pos]
    key ^= key >> np.uint64(31)
    key *= _MIX
    key ^= key >> np.uint64(29)
    return key, pos

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
    """Lowercased texts with non-ASCII punctuation and symbols turned into spaces."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks else pa.array([], pa.string())
    texts = lowercase(pc.fill_null(texts, ""))
    other = pc.invert(pc.string_is_ascii(texts))
    if pc.any(other).as_py():
        import polars as pl

        rest = pl.Series(pc.filter(texts, other)).str.replace_all(_NON_ASCII_PUNCT, " ")
        texts = pc.replace_with_mask(texts, other, rest.to_arrow().cast(texts.type))
    return texts


def normalized_words(texts: pa.Array | pa.ChunkedArray) -> Words:
    data, offsets = utf8_buffer(fold(texts))
    data = _FOLD[data]  # ASCII punctuation -> space (UTF-8 continuation bytes are >= 0x80)
    starts, ends, counts, _ = words(data, offsets)
    buffer = np.concatenate([data, np.zeros(PAD, np.uint8)])
    hashes = ranges_hashes(buffer, starts, ends - starts, short=True).astype(np.uint64)
    return Words(hashes, counts.astype(np.int64))


def ngram_keys(w: Words, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Keys of every n-gram and the index of its first word (documents never straddled)."""
    total = len(w.hashes)
    if total < n:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    doc = np.repeat(np.arange(len(w.counts)), w.counts)
    pos = np.arange(total - n + 1, dtype=np.int64)
    ok = pos + n <= (w.starts + w.counts)[doc[: len(pos)]]
    pos = pos[ok]
    key = w.hashes[pos].copy()
    for j in range(1, n):
        key = key * _MUL + w.hashes[pos + j]
    key ^= key >> np.uint64(31)
    key *= _MIX
    key ^= key >> np.uint64(29)
    return key, pos

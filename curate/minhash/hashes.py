"""One 32-bit hash per shingle, for a whole batch, in document order.

The hash function, which the manifest names and `shingle_hash` spells out in plain Python
(it is the `hashfunc` to give datasketch for the same signatures):

- word shingles: xxh32 (seed 0) of each word's UTF-8 bytes, then xxh32 of the shingle's
  word hashes as 4 little-endian bytes each, in order. Hashing words once and shingles as
  fixed-length runs of word hashes costs about a third of hashing every shingle's text, and
  a shingle's hash does not depend on the whitespace between its words;
- character shingles: xxh32 of the shingle's UTF-8 bytes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import xxhash

from curate.minhash.shingles import CHAR, lowercase, shingle, utf8_buffer, words
from curate.minhash.xxh32 import PAD, words_view, xxh32_ranges, xxh32_word_runs

U32 = np.uint32
RANGE_BLOCK = 1 << 15
RUN_BLOCK = 1 << 16


def word_shingle_hash(shingle: bytes) -> int:
    """The hash of one word shingle (its words joined by single spaces), in plain Python."""
    word_hashes = b"".join(
        xxhash.xxh32_intdigest(w).to_bytes(4, "little") for w in shingle.split(b" ")
    )
    return xxhash.xxh32_intdigest(word_hashes)


def shingle_hash(unit: str) -> Callable[[bytes], int]:
    """The hash function of a shingle unit, in plain Python."""
    return xxhash.xxh32_intdigest if unit == CHAR else word_shingle_hash


def hash_shingles(
    texts: pa.Array | pa.ChunkedArray, unit: str, size: int, low: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Every shingle's hash (uint32, grouped by document, in order) and the number of
    shingles of each document."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks else pa.array([], pa.string())
    if unit == CHAR:
        found = shingle(texts, unit, size, low)
        return ranges_hashes(found.buffer, found.starts, found.lengths), found.counts
    if low:
        texts = lowercase(texts)
    data, offsets = utf8_buffer(texts)
    starts, ends, counts, _ = words(data, offsets)
    buffer = np.concatenate([data, np.zeros(PAD, np.uint8)])
    word_hashes = ranges_hashes(buffer, starts, ends - starts, short=True)
    return word_runs(word_hashes, counts, size), np.where(
        counts >= size, counts - size + 1, np.minimum(counts, 1)
    )


def ranges_hashes(
    buffer: np.ndarray, starts: np.ndarray, lengths: np.ndarray, short: bool = False
) -> np.ndarray:
    """xxh32 of every byte range of `buffer` (which ends with PAD zero bytes), in blocks.

    Long ranges (shingles) read many 4-byte words: an aligned copy of the buffer's words
    makes those gathers about twice as fast and pays for itself. Short ones (words) read
    one or two and are faster straight from the unaligned view, in larger blocks."""
    n = len(starts)
    out = np.empty(n, U32)
    view = words_view(buffer) if short else words_view(buffer).copy()
    block = RANGE_BLOCK * 4 if short else RANGE_BLOCK
    for c0 in range(0, n, block):
        c1 = min(n, c0 + block)
        out[c0:c1] = xxh32_ranges(buffer, starts[c0:c1], lengths[c0:c1], view)
    return out


def word_runs(word_hashes: np.ndarray, counts: np.ndarray, size: int) -> np.ndarray:
    """Hashes of the word shingles of each document, given its words' hashes: one per run of
    `size` consecutive words, or one of all words when a document has fewer."""
    doc_end = np.cumsum(counts)
    first = np.ones(len(word_hashes), bool)  # which words start a shingle
    for j in range(1, size):
        first[doc_end[counts > j] - j] = False
    short = (counts > 0) & (counts < size)
    first[(doc_end - counts)[short]] = True
    first_word = np.flatnonzero(first)
    out = np.empty(len(first_word), U32)
    full = np.ones(len(first_word), bool)
    if short.any():
        full[np.searchsorted(first_word, (doc_end - counts)[short])] = False
        as_bytes = np.concatenate(
            [word_hashes.astype("<u4").view(np.uint8), np.zeros(PAD, np.uint8)]
        )
        out[~full] = ranges_hashes(
            as_bytes, 4 * (doc_end - counts)[short], 4 * counts[short].astype(np.int64)
        )
    runs = np.flatnonzero(full)
    wanted = first_word[runs]
    # runs of `size` word hashes, block by block (each block overlaps the next by size-1)
    for b0 in range(0, len(word_hashes) - size + 1, RUN_BLOCK):
        b1 = min(len(word_hashes) - size + 1, b0 + RUN_BLOCK)
        lo, hi = np.searchsorted(wanted, [b0, b1])
        if lo == hi:
            continue
        block = xxh32_word_runs(word_hashes[b0 : b1 + size - 1], size)
        out[runs[lo:hi]] = block[wanted[lo:hi] - b0]
    return out

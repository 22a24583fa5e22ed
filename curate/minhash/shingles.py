"""Documents to shingles: byte ranges of one buffer, computed for a whole batch at once.

The definition, which `reference_shingles` spells out in plain Python and the stage's
manifest records: optionally `text.lower()`, then the words of `text.split()` (Unicode
whitespace, as Python defines it) joined by single spaces; a word shingle is `size`
consecutive words joined by a space, a character shingle is `size` consecutive code
points of that joined text. A document with fewer units than `size` has one shingle,
all of its units; a document with no words has none (it is left to exact dedup).

The vectorised path never builds a Python string per shingle: it finds word bounds
with numpy over the batch's UTF-8 bytes, compacts the words into one buffer with single
spaces between them, and returns each shingle as (start, length) in that buffer, ready
for `xxh32_ranges`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate.minhash.xxh32 import PAD

WORD = "word"
CHAR = "char"

_ASCII_SPACE = np.zeros(256, dtype=bool)
_ASCII_SPACE[[9, 10, 11, 12, 13, 28, 29, 30, 31, 32]] = True
# Python's non-ASCII whitespace, by UTF-8 encoding: U+0085, U+00A0 (2 bytes); U+1680,
# U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000 (3 bytes).
_SPACE2 = {(0xC2, 0x85), (0xC2, 0xA0)}
_SPACE3 = {(0xE1, 0x9A, 0x80), (0xE2, 0x80, 0xA8), (0xE2, 0x80, 0xA9), (0xE2, 0x80, 0xAF)}
_SPACE3 |= {(0xE2, 0x81, 0x9F), (0xE3, 0x80, 0x80)}
_SPACE3 |= {(0xE2, 0x80, 0x80 + k) for k in range(11)}


def reference_shingles(text: str, unit: str, size: int, lowercase: bool) -> list[bytes]:
    """The shingles of one document, in plain Python: the definition the fast path matches."""
    if lowercase:
        text = text.lower()
    words = text.split()
    if not words:
        return []
    if unit == WORD:
        units: list[str] = words
        sep = " "
    else:
        units = list(" ".join(words))
        sep = ""
    if len(units) < size:
        return [sep.join(units).encode()]
    return [sep.join(units[i : i + size]).encode() for i in range(len(units) - size + 1)]


@dataclass
class Shingles:
    """Every shingle of a batch as a byte range of `buffer`, grouped by document."""

    buffer: np.ndarray  # uint8: the documents' words, single-spaced, then PAD zero bytes
    starts: np.ndarray  # int64, one per shingle
    lengths: np.ndarray  # int64, one per shingle
    counts: np.ndarray  # int64, shingles per document (0 for a document without words)


@lru_cache(maxsize=1)
def _python_only_lower() -> str:
    """A regex matching any character whose `str.lower()` Arrow's `utf8_lower` does not give:
    those the two libraries' Unicode tables map differently (checked here, over the Basic
    Multilingual Plane, for the versions installed), capital sigma (Python lowers it by
    context, to a final sigma at the end of a word) and everything beyond the BMP."""
    chars = [chr(c) for c in range(0x10000) if not 0xD800 <= c < 0xE000]
    arrow = pc.utf8_lower(pa.array(chars)).to_pylist()
    odd = [c for c, low in zip(chars, arrow, strict=True) if c.lower() != low]
    odd.append("\u03a3")
    return "[" + "".join(f"\\x{{{ord(c):x}}}" for c in sorted(set(odd))) + "\\x{10000}-\\x{10ffff}]"


def lowercase(texts: pa.Array) -> pa.Array:
    """`str.lower()` of every string, the same code points Python gives: Arrow's kernels where
    they agree with Python (ASCII strings; strings without the characters they disagree on),
    Python's own for the rest."""
    lowered = pc.ascii_lower(texts)
    other = pc.invert(pc.fill_null(pc.string_is_ascii(texts), True))
    if not pc.any(other).as_py():
        return lowered
    rest = pc.filter(texts, other)
    rest_lowered = pc.utf8_lower(rest)
    python = pc.match_substring_regex(rest, _python_only_lower())
    if pc.any(python).as_py():
        values = [v.lower() for v in pc.filter(rest, python).to_pylist()]
        rest_lowered = pc.replace_with_mask(rest_lowered, python, pa.array(values, rest.type))
    return pc.replace_with_mask(lowered, other, rest_lowered)


def utf8_buffer(texts: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """A string column's UTF-8 bytes and offsets (int64, from 0); nulls are empty strings."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks else pa.array([], pa.string())
    if texts.null_count:
        texts = pc.fill_null(texts, "")
    if texts.type not in (pa.string(), pa.large_string()):
        texts = texts.cast(pa.large_string())
    offset_type = np.int64 if texts.type == pa.large_string() else np.int32
    _, offsets_buf, data_buf = texts.buffers()
    n = len(texts)
    offsets = np.frombuffer(offsets_buf, dtype=offset_type)[texts.offset : texts.offset + n + 1]
    offsets = offsets.astype(np.int64)
    if data_buf is None or n == 0:
        return np.zeros(0, np.uint8), np.zeros(n + 1, np.int64)
    data = np.frombuffer(data_buf, dtype=np.uint8)[offsets[0] : offsets[-1]]
    return data, offsets - offsets[0]


def space_mask(data: np.ndarray) -> np.ndarray:
    """True for every byte of a whitespace character (as Python's `str.isspace` defines it)."""
    shifted = np.subtract(data, np.uint8(9))  # uint8 wraps: \t..\r become 0..4
    space = shifted <= 4
    np.subtract(data, np.uint8(28), out=shifted)  # \x1c..\x1f and the space become 0..4
    space |= shifted <= 4
    lead = np.flatnonzero(data >= 0xC2)  # lead bytes of 2- to 4-byte characters
    lead = lead[(data[lead] == 0xC2) | (np.subtract(data[lead], np.uint8(0xE1)) <= 2)]
    if len(lead):
        padded = np.concatenate([data, np.zeros(2, np.uint8)])
        b0, b1, b2 = padded[lead], padded[lead + 1], padded[lead + 2]
        two = np.zeros(len(lead), bool)
        for x, y in _SPACE2:
            two |= (b0 == x) & (b1 == y)
        three = np.zeros(len(lead), bool)
        for x, y, z in _SPACE3:
            three |= (b0 == x) & (b1 == y) & (b2 == z)
        for k, hit in ((2, two), (3, three)):
            at = lead[hit]
            for j in range(k):
                space[at + j] = True
    return space


def words(
    data: np.ndarray, offsets: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Word starts and ends (byte positions), the number of words of each document, and
    the mask of word bytes."""
    if len(data) == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, np.zeros(len(offsets) - 1, np.int64), np.zeros(0, bool)
    inword = ~space_mask(data)
    # Where inword changes (with False on both sides): positions alternate start, end.
    padded = np.zeros(len(data) + 2, bool)
    padded[1:-1] = inword
    bounds = np.flatnonzero(padded[1:] != padded[:-1])
    starts, ends = bounds[0::2], bounds[1::2]
    # A word may not run across documents: split where a document starts inside one.
    inner = offsets[1:-1]
    inner = inner[(inner > 0) & (inner < len(data))]
    inner = inner[np.concatenate([[True], inner[1:] != inner[:-1]])] if len(inner) else inner
    cut = inner[inword[inner] & inword[inner - 1]]
    if len(cut):
        starts = np.insert(starts, np.searchsorted(starts, cut), cut)
        ends = np.insert(ends, np.searchsorted(ends, cut), cut)
    counts = np.diff(np.searchsorted(starts, offsets))
    return starts.astype(np.int64), ends.astype(np.int64), counts, inword


def join_words(
    data: np.ndarray, inword: np.ndarray, starts: np.ndarray, ends: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each document's words joined by single spaces, documents back to back in one buffer
    (then PAD zero bytes); returns it with the words' starts and ends in it."""
    lengths = ends - starts
    sep = np.ones(len(starts), np.int64)
    sep[np.cumsum(counts)[counts > 0] - 1] = 0  # no space after a document's last word
    new_ends = np.cumsum(lengths + sep) - sep
    new_starts = new_ends - lengths
    # The first whitespace byte after every word but a document's last is kept, as a space.
    keep = inword.copy()
    keep[ends[sep == 1]] = True
    buffer = np.concatenate([data[keep], np.zeros(PAD, np.uint8)])
    buffer[new_ends[sep == 1]] = 32
    return buffer, new_starts, new_ends


def windows(
    unit_starts: np.ndarray, unit_ends: np.ndarray, counts: np.ndarray, size: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shingles of `size` consecutive units per document (one of all units when fewer)."""
    per_doc = np.where(counts >= size, counts - size + 1, np.minimum(counts, 1))
    doc_end = np.cumsum(counts)
    # A shingle starts at every unit but the last size-1 of each document, and at the
    # first unit of a document with fewer units than that.
    first = np.ones(len(unit_starts), bool)
    for j in range(1, size):
        tail = doc_end[counts > j] - j
        first[tail] = False
    short = (counts > 0) & (counts < size)
    first[(doc_end - counts)[short]] = True
    first_unit = np.flatnonzero(first)
    last_unit = first_unit + (size - 1)
    if short.any():  # a short document's one shingle ends at its last unit
        is_short = np.repeat(short, per_doc)
        last_unit[is_short] = doc_end[short] - 1
    starts = unit_starts[first_unit]
    return starts, unit_ends[last_unit] - starts, per_doc


def shingle(texts: pa.Array | pa.ChunkedArray, unit: str, size: int, low: bool) -> Shingles:
    """Every shingle of every document of a string column."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks else pa.array([], pa.string())
    if low:
        texts = lowercase(texts)
    data, offsets = utf8_buffer(texts)
    wstarts, wends, wcounts, inword = words(data, offsets)
    buffer, wstarts, wends = join_words(data, inword, wstarts, wends, wcounts)
    if unit == WORD:
        starts, lengths, counts = windows(wstarts, wends, wcounts, size)
    else:
        starts, lengths, counts = _char_windows(buffer, wstarts, wends, wcounts, size)
    return Shingles(buffer, starts, lengths, counts)


def _char_windows(
    buffer: np.ndarray, wstarts: np.ndarray, wends: np.ndarray, wcounts: np.ndarray, size: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # Documents lie back to back in the joined buffer, so each code point belongs to the
    # document whose byte range holds it.
    total = int(wends[-1]) if len(wends) else 0
    doc_end = np.zeros(len(wcounts), np.int64)
    has = wcounts > 0
    doc_end[has] = wends[np.cumsum(wcounts)[has] - 1]
    doc_end = np.maximum.accumulate(doc_end) if len(doc_end) else doc_end
    cps = np.flatnonzero((buffer[:total] & 0xC0) != 0x80)  # code point starts
    counts = np.diff(np.searchsorted(cps, doc_end), prepend=0)
    ends = np.empty_like(cps)
    ends[:-1] = cps[1:]
    if len(ends):
        ends[-1] = total
    return windows(cps, ends, counts, size)

"""Long rendered conversations through a tokenizer.json, encoded in pieces with offsets.

`tokenizers` keeps per-byte alignments, per-token strings and offsets for the text it
encodes with offsets: a 60 MB conversation took 11 GB. Cut where the tokenize stage cuts
(`curate.tokenizers.long_texts`: before a space between a non-space character and a
letter, a pre-token boundary of the byte-level BPE families), each piece gives the ids of
its part of the whole text, and each token's offsets in the piece are its offsets in the
whole text less the piece's start (offsets are per pre-token, from the original text).

Here the template's special-token strings are parsed out of the text first, as
`apply_chat_template` does; no cut may fall inside or beside one that could see across it.
So besides the tokenize stage's conditions (`cuts_safely`: a ByteLevel pre-tokenizer with
its own regex, or Llama 3's or Qwen2's Split then ByteLevel, no prefix space, no
normalizer but Qwen2's NFC), no added token, special or not, may hold whitespace or strip
it or match only as a single word (`chat_cuts_safely`). With NFC, offsets still point into
the original text, and normalization never crosses the space at a cut.

The assistant mask is transformers' overlap rule (1 on each token whose offsets overlap a
span), which the whole-text lookups in `curate.chat.tokens` give (tests/chat/test_tokens);
it is decided piece by piece, so no offsets outlive their piece's call. Texts shorter than
`PIECE_CHARS` never come here: their ids and masks are made as before.
tests/chat/test_long_conversations.py compares pieces with whole texts, ids and masks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from curate.tokenizers.encoders import flatten
from curate.tokenizers.long_texts import MARKS, PIECE_CHARS, cut_points, cuts_safely

# characters handed to `encode_batch` in one call: with offsets it holds ~170 bytes per
# character while it runs (measured on Python source with the sample chat tokenizer)
BATCH_CHARS = 1 << 20

Span = tuple[int, int]


def chat_cuts_safely(tokenizer_json: str) -> bool:
    """Whether texts with special-token strings parsed out may be cut (see the docstring)."""
    if not cuts_safely(tokenizer_json):
        return False
    data: dict[str, Any] = json.loads(tokenizer_json)
    for token in data.get("added_tokens") or ():
        content = str(token.get("content", ""))
        if token.get("lstrip") or token.get("rstrip") or token.get("single_word"):
            return False
        if not content or any(c.isspace() or c in MARKS for c in content):
            return False
    return True


def is_long(text: str, size: int = PIECE_CHARS, marks: bool = False) -> bool:
    return len(text) > size and bool(cut_points(text, size, marks))


def encode_long(
    tok: Any, text: str, spans: Sequence[Span], size: int = PIECE_CHARS, marks: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """The ids (uint32) and assistant mask (uint8) of one text, from its pieces encoded in
    calls of about BATCH_CHARS characters (`tok`: a `tokenizers.Tokenizer`; `marks`: see
    `cut_points`)."""
    bounds = [0, *cut_points(text, size, marks), len(text)]
    mask_of = _span_rule(spans)
    ids: list[np.ndarray] = []
    masks: list[np.ndarray] = []
    first = 0
    for j in range(1, len(bounds)):
        if bounds[j] - bounds[first] < BATCH_CHARS and j < len(bounds) - 1:
            continue
        starts = bounds[first:j]
        pieces = [text[a:b] for a, b in zip(starts, bounds[first + 1 : j + 1], strict=True)]
        encodings = tok.encode_batch(pieces, add_special_tokens=False)
        del pieces
        for at, enc in zip(starts, encodings, strict=True):
            flat, _ = flatten([enc.ids])
            offsets = np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2) + at
            ids.append(flat)
            masks.append(mask_of(offsets[:, 0], offsets[:, 1]))
        del encodings
        first = j
    return np.concatenate(ids), np.concatenate(masks)


def _span_rule(spans: Sequence[Span]) -> Any:
    """Tokens' [start, end) characters -> 1 where they overlap a span. Spans sorted, disjoint
    and not empty: one binary search per token (the first span ending after a token's start
    is the only one it can overlap); others span by span."""
    regular = all(a < b for a, b in spans) and all(
        spans[k][1] <= spans[k + 1][0] for k in range(len(spans) - 1)
    )
    s = np.asarray([a for a, _ in spans], np.int64)
    e = np.asarray([b for _, b in spans], np.int64)

    def mask(start: np.ndarray, end: np.ndarray) -> np.ndarray:
        if not len(s):
            return np.zeros(len(start), np.uint8)
        if regular:
            j = np.searchsorted(e, start, side="right")
            hit = (j < len(s)) & (s[np.minimum(j, len(s) - 1)] < end)
        else:
            hit = np.zeros(len(start), bool)
            for a, b in zip(s, e, strict=True):
                hit |= (end > a) & (start < b)
        return hit.astype(np.uint8)

    return mask

"""A long piece's tokens in windows, for the SentencePiece, tekken and tiktoken masks.

Where an assistant span begins or ends inside a piece of text, `curate.chat.tokens` gives
each of its tokens its characters (`curate.chat.pieces.token_characters`), in arrays of
about 150 bytes per token: 3 GB for the answer of a 60 MB conversation. A piece is cut
instead into windows of whole tokens that end on a character boundary; each window is a
piece of its own to `token_characters` (without SentencePiece's prefix space but for the
first), whose tokens add up to its bytes when the whole piece's do, which is checked
first, as `token_characters` checks it. A token's characters are the same counted from
the window's first character as from the piece's (tests/chat/test_tokens.py compares
both on every family).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from curate.reasons import UNMAPPABLE

WINDOW_TOKENS = 1 << 18  # tokens given characters at once; a batch's chosen pieces above it are cut


def unmappable(n_bytes: int, ids: np.ndarray, table: np.ndarray, dummy: int) -> str | None:
    """The reason, when a piece's tokens do not add up to its `n_bytes` (as
    `token_characters` says it), window by window."""
    total, negative = 0, False
    for at in range(0, len(ids), WINDOW_TOKENS):
        sizes = table[ids[at : at + WINDOW_TOKENS]]
        total += int(sizes.sum())
        negative |= bool(sizes.min() < 0)
    if len(ids):
        total -= dummy
    if negative or total != n_bytes:
        return UNMAPPABLE(n=n_bytes, total=total)
    return None


def windows(
    piece: str, blob: np.ndarray, ids: np.ndarray, table: np.ndarray, dummy: int, size: int
) -> Iterator[tuple[int, int, int, str]]:
    """(first token, end token, first character, text) of each window of a piece whose
    tokens add up to its bytes (`blob`, uint8), at most `size` tokens each."""
    n = len(ids)
    byte = char = start = 0
    while start < n:
        end, stop = min(start + size, n), len(blob)
        if end < n:
            sizes = table[ids[start:end]]
            if start == 0:
                sizes[0] -= dummy
            ends = byte + np.cumsum(sizes)
            boundary = (ends >= len(blob)) | (
                (blob[np.minimum(ends, len(blob) - 1)] & 0xC0) != 0x80
            )
            found = np.flatnonzero(boundary)
            if len(found):  # else (never with 5 tokens or more) the window takes the rest
                end, stop = start + int(found[-1]) + 1, int(ends[found[-1]])
            else:
                end = n
        chars = int(np.count_nonzero((blob[byte:stop] & 0xC0) != 0x80))
        yield start, end, char, piece[char : char + chars]
        byte, char, start = stop, char + chars, end

"""A batch of rendered conversations as pieces of text between special tokens.

What `curate.chat.tokens` needs to encode a whole batch in one call and put every token
back in its place: the layout of the batch (pieces and special tokens in text order, in
one character coordinate), the assistant spans in that coordinate, and, for the pieces a
span begins or ends inside, each token's characters from its length in bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from curate.reasons import UNMAPPABLE

Span = tuple[int, int]  # the assistant's [start, end) characters in a rendered text


@dataclass
class Layout:
    """A batch of rendered texts cut at the template's special tokens: its items (the
    non-empty pieces of text between them, and the special tokens) in text order, each
    with its [start, end) characters in one coordinate for the whole batch."""

    pieces: list[str]
    piece_conv: np.ndarray  # the conversation each piece belongs to
    piece_at: np.ndarray  # where it starts in its conversation (characters)
    special: np.ndarray  # (id, start in its conversation, length) of each special token
    is_piece: np.ndarray  # per item
    conv: np.ndarray  # per item: its conversation
    start: np.ndarray  # per item, batch coordinate
    end: np.ndarray
    per_conv: np.ndarray  # items per conversation
    base: np.ndarray  # where each conversation starts in the batch coordinate

    @classmethod
    def of(
        cls, parts: list[str], counts: np.ndarray, rooms: np.ndarray, specials: dict[str, int]
    ) -> Layout:
        """`parts`: each text as `re.split` cuts it (text, special, ..., text), `counts`
        parts per text, `rooms` the characters each text takes in the batch coordinate."""
        n_conv = len(counts)
        lengths = np.fromiter(map(len, parts), np.int64, len(parts))
        base = np.zeros(n_conv + 1, np.int64)
        np.cumsum(rooms, out=base[1:])
        first = np.zeros(n_conv + 1, np.int64)  # each text's first part
        np.cumsum(counts, out=first[1:])
        part_conv = np.repeat(np.arange(n_conv), counts)
        odd = ((np.arange(len(parts)) - first[:-1][part_conv]) & 1).astype(bool)
        ran = np.zeros(len(parts) + 1, np.int64)
        np.cumsum(lengths, out=ran[1:])
        local = ran[:-1] - ran[first[:-1]][part_conv]  # each part's start in its text
        kept = np.flatnonzero(odd | (lengths > 0))  # the items: empty pieces are no items
        is_piece = ~odd[kept]
        piece_parts, special_parts = kept[is_piece], kept[~is_piece]
        ids = np.fromiter((specials[parts[k]] for k in special_parts), np.int64, len(special_parts))
        conv = part_conv[kept]
        start = local[kept] + base[conv]
        return cls(
            pieces=[parts[k] for k in piece_parts],
            piece_conv=part_conv[piece_parts],
            piece_at=local[piece_parts],
            special=np.stack([ids, local[special_parts], lengths[special_parts]], axis=1),
            is_piece=is_piece,
            conv=conv,
            start=start,
            end=start + lengths[kept],
            per_conv=np.bincount(conv, minlength=n_conv),
            base=base,
        )


def global_spans(
    spans: list[list[Span]], base: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All conversations' spans in the batch coordinate, sorted, with which conversations
    have spans that are sorted, disjoint and not empty (`regular`): for those, one binary
    search tells the spans an item overlaps. The others are decided token by token."""
    regular = np.ones(len(spans), bool)
    starts: list[int] = []
    ends: list[int] = []
    for c, found in enumerate(spans):
        previous = -1
        for a, b in found:
            if a < previous or b <= a:
                regular[c] = False
                break
            previous = b
        else:
            shift = int(base[c])
            starts += (a + shift for a, _ in found)
            ends += (b + shift for _, b in found)
    return np.asarray(starts, np.int64), np.asarray(ends, np.int64), regular


def token_characters(
    pieces: list[str], piece_conv: np.ndarray, piece_at: np.ndarray, flat: np.ndarray,
    lengths: np.ndarray, table: np.ndarray, dummy: int,
) -> tuple[np.ndarray, np.ndarray, dict[int, str]]:  # fmt: skip
    """Each token's [start, end) characters in its conversation, from its length in bytes
    (`table`, less SentencePiece's prefix space `dummy` on a piece's first token), and the
    conversations whose pieces' tokens do not add up to their bytes, with the reason."""
    n_pieces = len(pieces)
    bounds = np.zeros(n_pieces + 1, np.int64)
    np.cumsum(lengths, out=bounds[1:])
    nonempty = lengths > 0
    sizes = table[flat]
    if dummy:
        sizes[bounds[:-1][nonempty]] -= dummy
    blob = "".join(pieces).encode()
    raw_len = np.fromiter((len(p.encode()) for p in pieces), np.int64, n_pieces)
    char_len = np.fromiter(map(len, pieces), np.int64, n_pieces)
    byte_at = np.zeros(n_pieces + 1, np.int64)
    np.cumsum(raw_len, out=byte_at[1:])
    running = np.cumsum(sizes)  # the blob's byte offsets, if every piece adds up
    ran = np.concatenate([[0], running])
    total = ran[bounds[1:]] - ran[bounds[:-1]]  # bytes of each piece's tokens
    wrong = total != raw_len
    if sizes.min(initial=0) < 0:  # <unk>: bytes unknown
        negative = np.flatnonzero(sizes < 0)
        wrong[np.searchsorted(bounds, negative, side="right") - 1] = True
    bad: dict[int, str] = {}
    for k in np.flatnonzero(wrong):
        bad.setdefault(
            int(piece_conv[k]),
            UNMAPPABLE(n=int(raw_len[k]), total=int(total[k])),
        )
    # with a wrong piece, each piece from its own start, so it moves no other
    shift_bytes = np.repeat(byte_at[:-1] - ran[bounds[:-1]], lengths) if bad else 0
    byte_end = running + shift_bytes
    byte_start = byte_end - sizes
    if len(blob) == int(char_len.sum()):  # ASCII: bytes are characters
        char_start, char_end = byte_start, byte_end
    else:
        # the character of byte b: b minus the continuation bytes up to and including b
        # (a running count over the blob: one pass, where a binary search per token
        # cost more; the last entry answers for the blob's end)
        cont = np.zeros(len(blob) + 1, np.int64)
        np.cumsum((np.frombuffer(blob, np.uint8) & 0xC0) == 0x80, out=cont[:-1])
        cont[-1] = cont[-2] if len(blob) else 0

        # clipped: a wrong piece's tokens may point outside the blob (its conversation
        # is reported); there the count is all or none, as the binary search answered
        def before(b: np.ndarray) -> np.ndarray:
            return cont[np.clip(b, 0, len(blob))]

        char_start = byte_start - before(byte_start)
        # a token that ends inside a character holds that character (as tokenizers says)
        last = byte_end - 1
        char_end = np.where(sizes > 0, last - before(last) + 1, char_start)
    char_at = np.zeros(n_pieces + 1, np.int64)
    np.cumsum(char_len, out=char_at[1:])
    shift = np.repeat(piece_at - char_at[:-1], lengths)
    return char_start + shift, char_end + shift, bad

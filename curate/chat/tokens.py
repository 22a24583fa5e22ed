"""Rendered conversations to ids and each token's characters, for every tokenizer family.

The ids are those of `apply_chat_template(tokenize=True)`: the rendered text with the
template's special-token strings as their ids and no special tokens added. The rest of
the text goes through the family's reference or its fastest exact encoder (the tokenize
stage's loaders, `curate.tokenizers`):

- tokenizer.json: `tokenizers`, as `transformers` calls it (special-token strings parsed
  anywhere in the text, content included, as transformers does by default), with the
  library's own character offsets; a text longer than 256 Ki characters in pieces, where
  the tokenizer cuts anyway (`curate.chat.long_conversations`: the offsets of a whole
  text take ~170 bytes per character);
- SentencePiece, tekken and tiktoken ranks: the text is cut at the special-token strings
  the *template* wrote, which become their ids; the pieces between are encoded as text by
  `sentencepiece` / `tiktoken`, so a literal `</s>` or `[INST]` inside a message stays text,
  as these libraries (and mistral-common) encode it. Which occurrences are the template's
  is known by wrapping the ones in message contents in private-use markers before
  rendering, the way transformers' `sanitize_control_tokens` does; the markers are removed
  before encoding.

The assistant mask is transformers' overlap rule: 1 on every token that overlaps an
assistant span. With tokenizer.json it is computed from the library's offsets. For the
piece-encoded families a piece's tokens cover that piece's characters only, so a piece
wholly inside a span is all 1 and one outside all 0, with no offsets (most pieces: a
span usually begins and ends at a special token). Only the pieces a span begins or ends
inside get each token's characters, from its length in bytes (a table made once per
worker), checked against the text: a piece whose tokens do not add up to its bytes is
reported, never guessed.
"""

from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from curate.chat.long_conversations import chat_cuts_safely, encode_long, is_long
from curate.chat.long_pieces import WINDOW_TOKENS, unmappable, windows
from curate.chat.pieces import Layout, Span, global_spans, token_characters
from curate.tokenizers.encoders import Encoder, flatten, load_encoder
from curate.tokenizers.long_texts import cuts_at_marks
from curate.tokenizers.source import TokenizerSource

OPEN, CLOSE = "\ue000", "\ue001"  # wrap special-token strings found in message contents


class Unmappable(Exception):
    """A piece's tokens do not add up to its bytes (the tokenizer changed the text)."""


@dataclass
class Encoded:
    """One conversation: its ids, and 1 on each token the assistant's loss is on."""

    ids: np.ndarray  # an unsigned or signed integer type: every id fits int32
    mask: np.ndarray  # uint8


class ChatTokenizer(ABC):
    """Loaded once per worker; `encode` takes a batch of rendered conversations."""

    specials: dict[str, int]
    vocab_size: int
    library: str
    marks_content: bool  # whether contents must be marked before rendering

    @abstractmethod
    def encode(self, texts: list[str], spans: list[list[Span]]) -> list[Encoded | Unmappable]:
        """Texts as rendered (with markers, when `marks_content`), and each one's assistant
        spans in the text without markers. The mask follows transformers' assistant mask
        (`return_assistant_tokens_mask`): 1 on every token that overlaps a span."""

    def mark(self, content: str) -> str:
        """A message content with its special-token strings wrapped in markers."""
        return content

    @staticmethod
    def clean(text: str) -> str:
        """The rendered text without markers: what transformers renders."""
        return text.replace(OPEN, "").replace(CLOSE, "") if OPEN in text or CLOSE in text else text


def alternation(strings: Iterable[str]) -> str:
    """A regex matching any of the strings, longest first, as a trie: tekken reserves 1000
    special tokens, and a flat alternation tries each of them at every `<` or `[`."""
    trie: dict[str, Any] = {}
    for text in strings:
        if not text:
            continue
        node = trie
        for ch in text:
            node = node.setdefault(ch, {})
        node[""] = {}
    return _trie_regex(trie) if trie else "(?!)"


def _trie_regex(node: dict[str, Any]) -> str:
    branches = [re.escape(ch) + _trie_regex(child) for ch, child in sorted(node.items()) if ch]
    ends_here = "" in node
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    # greedy: a longer special wins over one it begins with (as tokenizers matches them)
    return f"(?:{body})?" if ends_here else body


def re2_alternation(strings: Iterable[str]) -> str:
    """The same strings for Arrow's RE2 (`pyarrow.compute.match_substring_regex`, which
    scans a whole column in C): ASCII other than letters and digits written as `\\x{..}`,
    so no character is read as syntax; RE2 needs no trie (it is automaton-based)."""

    def literal(text: str) -> str:
        return "".join(
            ch if not ch.isascii() or ch.isalnum() else f"\\x{{{ord(ch):x}}}" for ch in text
        )

    found = sorted({t for t in strings if t}, key=lambda t: (-len(t), t))
    return "|".join(map(literal, found)) if found else ""


@dataclass(frozen=True)
class TiktokenOptions:
    """What a bare tiktoken ranks file cannot say: its split pattern and special tokens."""

    pattern: str | None = None
    special_tokens: dict[str, int] | None = None


def vocab_size(source: TokenizerSource) -> int:
    """A tokenizer.json's number of ids, without building an encoder (the other families'
    come from `piece_encoder`, which also says their BOS and EOS)."""
    import tokenizers

    tok = tokenizers.Tokenizer.from_file(str(source.main))
    return int(tok.get_vocab_size(with_added_tokens=True))


def piece_encoder(
    source: TokenizerSource, threads: int, options: TiktokenOptions, warm: bool = False
) -> Encoder:
    return load_encoder(source, threads=threads, pattern=options.pattern,
                        special_tokens=options.special_tokens, warm=warm)  # fmt: skip


def load_chat_tokenizer(
    source: TokenizerSource, threads: int = 1, options: TiktokenOptions = TiktokenOptions()
) -> ChatTokenizer:
    if source.kind == "tokenizer.json":
        return HFChatTokenizer(source, threads)
    return PieceChatTokenizer(source, threads, options)


class HFChatTokenizer(ChatTokenizer):
    marks_content = False

    def __init__(self, source: TokenizerSource, threads: int) -> None:
        os.environ.setdefault("RAYON_NUM_THREADS", str(max(1, threads)))
        import tokenizers

        tok = tokenizers.Tokenizer.from_file(str(source.main))
        tok.no_truncation()
        tok.no_padding()
        tok.encode_special_tokens = False  # as apply_chat_template: special strings parsed
        self.tok = tok
        added = tok.get_added_tokens_decoder()
        self.specials = {t.content: i for i, t in sorted(added.items()) if t.special}
        self.vocab_size = tok.get_vocab_size(with_added_tokens=True)
        self.library = f"tokenizers {tokenizers.__version__} encode_batch"
        self.cuts = chat_cuts_safely(tok.to_str())  # long texts in pieces
        self.marks = cuts_at_marks(tok.to_str())  # cut before newlines, CJK punctuation too

    def encode(self, texts: list[str], spans: list[list[Span]]) -> list[Encoded | Unmappable]:
        """The overlap rule by two lookups per span: the tokens holding its first and last
        characters and all between, which is the rule wherever every character is in a
        token (byte-level BPE: always). Where one is in none, the offsets of every token
        decide, as transformers' loop over them does. Reading each token's offsets into
        Python costs more than the encoding; the lookups stay in Rust."""
        if not texts:
            return []
        long = {i for i, t in enumerate(texts) if self.cuts and is_long(t, marks=self.marks)}
        if long:  # encoded in pieces (curate.chat.long_conversations), the rest as before
            rest = [i for i in range(len(texts)) if i not in long]
            out = self.encode([texts[i] for i in rest], [spans[i] for i in rest])
            for i in sorted(long):
                out.insert(i, Encoded(*encode_long(self.tok, texts[i], spans[i], marks=self.marks)))
            return out
        out = []
        encodings = self.tok.encode_batch(texts, add_special_tokens=False)
        flat, lengths = flatten([enc.ids for enc in encodings])
        cuts = np.cumsum(lengths)[:-1]
        for enc, ids, found in zip(encodings, np.split(flat, cuts), spans, strict=True):
            mask = np.zeros(len(ids), dtype=np.uint8)
            for start, end in found:
                first = enc.char_to_token(start) if end > start else None
                last = enc.char_to_token(end - 1) if first is not None else None
                if last is None:
                    mask = _overlapping(enc, found)
                    break
                # a character may be in several tokens (byte tokens of one character):
                # char_to_token names the first (tests/chat/test_tokens.py), the rest follow
                while last + 1 < len(ids) and (enc.token_to_chars(last + 1) or (end,))[0] < end:
                    last += 1
                mask[first : last + 1] = 1
            out.append(Encoded(ids, mask))
        return out


def _overlapping(enc: Any, spans: list[Span]) -> np.ndarray:
    """1 on every token whose offsets overlap a span."""
    offsets = np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2)
    hit = np.zeros(len(offsets), dtype=bool)
    for start, end in spans:
        hit |= (offsets[:, 1] > start) & (offsets[:, 0] < end)
    return hit.astype(np.uint8)


class PieceChatTokenizer(ChatTokenizer):
    marks_content = True

    def __init__(self, source: TokenizerSource, threads: int, options: TiktokenOptions) -> None:
        self.encoder = piece_encoder(source, threads, options, warm=True)
        self.defaults = self.encoder.defaults  # the format's BOS and EOS, for the template
        self.specials = dict(self.encoder.special)
        self.vocab_size = self.encoder.vocab_size
        self.library = self.encoder.library
        self.table = _byte_lengths(source, self.encoder, self.vocab_size)
        for token, i in self.specials.items():
            self.table[i] = len(token.encode())
        self.dummy = int(self.table[self._ids("x")].sum()) - 1  # SentencePiece's prefix space
        self.window_tokens = WINDOW_TOKENS  # past it, tokens given characters in windows
        alternatives = alternation(self.specials)
        self.any_special = re.compile(alternatives)
        # texts rendered from marked contents; the others are searched with any_special
        # alone, which sre scans about 6x faster (it skips to the specials' first characters)
        self.split = re.compile(f"{OPEN}({alternatives}){CLOSE}|[{OPEN}{CLOSE}]|({alternatives})")
        self.split_plain = re.compile(f"({alternatives})")

    def _ids(self, text: str) -> np.ndarray:
        return self.encoder.encode([text])[0].astype(np.int64)

    def mark(self, content: str) -> str:
        content = content.replace(OPEN, "").replace(CLOSE, "")
        return self.any_special.sub(lambda m: OPEN + m.group(0) + CLOSE, content)

    def encode(self, texts: list[str], spans: list[list[Span]]) -> list[Encoded | Unmappable]:
        if not texts:
            return []
        parts: list[str] = []  # per text: piece, special, piece, ..., piece (pieces may be "")
        counts = np.empty(len(texts), np.int64)
        rooms = np.empty(len(texts), np.int64)
        for c, text in enumerate(texts):
            if OPEN in text or CLOSE in text:
                cut = self._cut_marked(text)
            else:  # every special string is the template's: one split in C
                cut = self.split_plain.split(text)
            parts += cut
            counts[c] = len(cut)
            rooms[c] = len(text) + 1  # the batch coordinate keeps texts apart
        return self._assemble(Layout.of(parts, counts, rooms, self.specials), spans)

    def _cut_marked(self, text: str) -> list[str]:
        """Special strings between markers are content (text); the others the template's.
        Cut as `re.split` cuts: text, special, text, ..., text, without the markers."""
        out: list[str] = []
        buf: list[str] = []
        at = 0  # position in the rendered text
        for m in self.split.finditer(text):
            buf.append(text[at : m.start()])
            at = m.end()
            content_literal, template_special = m.group(1), m.group(2)
            if content_literal is not None:
                buf.append(content_literal)
            elif template_special is not None:
                out += ("".join(buf), template_special)
                buf = []
        buf.append(text[at:])
        out.append("".join(buf))
        return out

    def _assemble(self, layout: Layout, spans: list[list[Span]]) -> list[Encoded | Unmappable]:
        """Every piece encoded in one call; the mask decided per piece where the piece lies
        wholly inside or outside the assistant's spans (no token offsets needed: a piece's
        tokens cover its characters only), and from each token's characters for the pieces
        a span begins or ends inside; then all tokens put in text order (whole-batch numpy)."""
        pieces = layout.pieces
        empty = np.empty(0, np.int64)
        if pieces:
            flat, lengths = self.encoder.encode(pieces)  # uint32 ids: half the traffic
            lengths = lengths.astype(np.int64)
        else:
            flat, lengths = empty.astype(np.uint32), empty
        first = np.zeros(len(lengths), np.int64)  # each piece's first token in `flat`
        np.cumsum(lengths[:-1], out=first[1:])
        is_piece, conv, start, end = layout.is_piece, layout.conv, layout.start, layout.end
        base, per_conv, sp = layout.base, layout.per_conv, layout.special
        n_items = len(is_piece)
        s, e, regular = global_spans(spans, base)
        # the overlap rule per item: a span overlaps it, or holds it (the spans sorted and
        # disjoint: the first one ending after the item's start is the only candidate)
        overlaps = np.zeros(n_items, bool)
        inside = np.zeros(n_items, bool)
        at_span_start = np.zeros(n_items, bool)
        if len(s):
            j = np.searchsorted(e, start, side="right")
            jj = np.minimum(j, len(s) - 1)
            overlaps = (j < len(s)) & (s[jj] < end)
            inside = overlaps & (s[jj] <= start) & (end <= e[jj]) & (end > start)
            at_span_start = inside & (s[jj] == start)
        irregular = ~regular[conv]  # their spans are not in s, e: decided token by token
        piece_inside = inside[is_piece]
        piece_mask = np.repeat(piece_inside, lengths).astype(np.uint8)
        if self.dummy and len(flat):
            # SentencePiece's prefix space as a token of its own has no characters: at a
            # span's first character it overlaps nothing (the overlap rule), so it is off
            head = first[at_span_start[is_piece] & (lengths > 0)]
            piece_mask[head[self.table[flat[head]] == self.dummy]] = 0
        bad: dict[int, Unmappable] = {}
        straddle = is_piece & ((overlaps & ~inside) | irregular)
        if straddle.any():
            chosen = (np.cumsum(is_piece) - 1)[straddle]  # their piece numbers
            bad = self._token_mask(layout, flat, lengths, first, chosen, spans,
                                   (s, e, base, regular), piece_mask)  # fmt: skip
        special_mask = overlaps[~is_piece].astype(np.uint8)
        for k in np.flatnonzero(irregular[~is_piece]):
            _, at, length = (int(v) for v in sp[k])
            found = spans[int(conv[~is_piece][k])]
            special_mask[k] = any(b > at and a < at + length for a, b in found)
        # all tokens in text order
        size = np.ones(n_items, np.int64)
        size[is_piece] = lengths
        offset = np.zeros(n_items + 1, np.int64)
        np.cumsum(size, out=offset[1:])
        total = int(offset[-1])
        ids = np.empty(total, np.uint32)
        mask = np.empty(total, np.uint8)
        if len(flat):
            dest = np.arange(len(flat)) + np.repeat(offset[:-1][is_piece] - first, lengths)
            ids[dest], mask[dest] = flat, piece_mask
        if len(sp):
            dest = offset[:-1][~is_piece]
            ids[dest], mask[dest] = sp[:, 0], special_mask
        cuts = offset[np.cumsum(per_conv)[:-1]]
        out: list[Encoded | Unmappable] = [
            Encoded(i, m) for i, m in zip(np.split(ids, cuts), np.split(mask, cuts), strict=True)
        ]
        for c, exc in bad.items():
            out[c] = exc
        return out

    def _token_mask(
        self, layout: Layout, flat: np.ndarray, lengths: np.ndarray, first: np.ndarray,
        chosen: np.ndarray, spans: list[list[Span]], batch_spans: tuple[np.ndarray, ...],
        out: np.ndarray,
    ) -> dict[int, Unmappable]:  # fmt: skip
        """The overlap rule token by token for the `chosen` pieces (written into `out`),
        from each token's characters; the conversations whose chosen pieces' tokens do not
        add up to their bytes are returned, never guessed. Past `window_tokens` tokens,
        piece by piece, a long piece in windows (`curate.chat.long_pieces`)."""
        if int(lengths[chosen].sum()) <= self.window_tokens:
            return self._mask_of(layout, flat, lengths, first, chosen, spans, batch_spans, out)
        bad: dict[int, Unmappable] = {}
        group: list[int] = []  # consecutive pieces of at most window_tokens tokens
        held = 0
        for k in [*map(int, chosen), None]:
            size = int(lengths[k]) if k is not None else 0
            if group and (k is None or held + size > self.window_tokens):
                found = self._mask_of(layout, flat, lengths, first, np.array(group), spans,
                                      batch_spans, out)  # fmt: skip
                for c, exc in found.items():
                    bad.setdefault(c, exc)  # a conversation's first piece that does not add up
                group, held = [], 0
            if k is None:
                break
            if size > self.window_tokens:
                for c, exc in self._mask_in_windows(layout, flat, lengths, first, k, spans,
                                                    batch_spans, out).items():  # fmt: skip
                    bad.setdefault(c, exc)
            else:
                group.append(k)
                held += size
        return bad

    def _mask_in_windows(
        self, layout: Layout, flat: np.ndarray, lengths: np.ndarray, first: np.ndarray,
        k: int, spans: list[list[Span]], batch_spans: tuple[np.ndarray, ...], out: np.ndarray,
    ) -> dict[int, Unmappable]:  # fmt: skip
        piece, conv, at = layout.pieces[k], int(layout.piece_conv[k]), int(layout.piece_at[k])
        lo = int(first[k])
        ids = flat[lo : lo + int(lengths[k])]
        blob = np.frombuffer(piece.encode(), np.uint8)
        reason = unmappable(len(blob), ids, self.table, self.dummy)
        if reason is not None:
            return {conv: Unmappable(reason)}
        one = np.zeros(1, np.int64)
        for start, end, char, text in windows(piece, blob, ids, self.table, self.dummy,
                                              self.window_tokens):  # fmt: skip
            window = Layout(pieces=[text], piece_conv=np.array([conv]),
                            piece_at=np.array([at + char]), **_NO_ITEMS)  # fmt: skip
            self._mask_of(window, ids[start:end], np.array([end - start]), one, one, spans,
                          batch_spans, out[lo + start : lo + end],
                          self.dummy if start == 0 else 0)  # fmt: skip
        return {}

    def _mask_of(
        self, layout: Layout, flat: np.ndarray, lengths: np.ndarray, first: np.ndarray,
        chosen: np.ndarray, spans: list[list[Span]], batch_spans: tuple[np.ndarray, ...],
        out: np.ndarray, dummy: int | None = None,
    ) -> dict[int, Unmappable]:  # fmt: skip
        sub_lengths = lengths[chosen]
        sub_first = np.zeros(len(chosen), np.int64)
        np.cumsum(sub_lengths[:-1], out=sub_first[1:])
        shift = np.repeat(first[chosen] - sub_first, sub_lengths)
        token = np.arange(int(sub_lengths.sum())) + shift  # their places in `flat`
        pieces = [layout.pieces[k] for k in chosen]
        convs, at = layout.piece_conv[chosen], layout.piece_at[chosen]
        dummy = self.dummy if dummy is None else dummy
        starts, ends, wrong = token_characters(pieces, convs, at, flat[token], sub_lengths,
                                               self.table, dummy)  # fmt: skip
        bad = {c: Unmappable(reason) for c, reason in wrong.items()}
        s, e, base, regular = batch_spans
        tconv = np.repeat(convs, sub_lengths)  # sorted
        hit = np.zeros(len(token), bool)
        if len(s):
            g_start, g_end = starts + base[tconv], ends + base[tconv]
            j = np.searchsorted(e, g_start, side="right")
            hit = (j < len(s)) & (s[np.minimum(j, len(s) - 1)] < g_end)
        for c in np.unique(tconv[~regular[tconv]]):
            lo, hi = np.searchsorted(tconv, [c, c + 1])
            for a, b in spans[c]:
                hit[lo:hi] |= (ends[lo:hi] > a) & (starts[lo:hi] < b)
        out[token] = hit
        return bad


_EMPTY = np.empty(0, np.int64)
# a window's Layout: only its pieces, their conversations and places are read
_NO_ITEMS = {"special": _EMPTY, "is_piece": _EMPTY, "conv": _EMPTY, "start": _EMPTY,
             "end": _EMPTY, "per_conv": _EMPTY, "base": _EMPTY}  # fmt: skip


def _byte_lengths(source: TokenizerSource, encoder: Encoder, vocab_size: int) -> np.ndarray:
    """How many bytes of text each id stands for (special ids are set by the caller)."""
    table = np.zeros(vocab_size, np.int64)
    if source.kind == "sentencepiece":
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=str(source.main))
        for i in range(sp.get_piece_size()):
            if sp.is_byte(i):
                table[i] = 1
            elif not (sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i)):
                table[i] = len(sp.id_to_piece(i).replace("\u2581", " ").encode())
            else:
                table[i] = -(1 << 30)  # <unk> in a piece: its bytes are unknown
        return table
    from curate.tokenizers.tiktoken_bpe import BPEEncoder

    assert isinstance(encoder, BPEEncoder), encoder
    return encoder.token_bytes()  # tekken and tiktoken: from the ranks in memory

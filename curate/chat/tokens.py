"""Rendered conversations to ids and each token's characters, for every tokenizer family.

The ids are those of `apply_chat_template(tokenize=True)`: the rendered text with the
template's special-token strings as their ids and no special tokens added. The rest of
the text goes through the family's reference or its fastest exact encoder (the tokenize
stage's loaders, `curate.tokenizers`):

- tokenizer.json: `tokenizers`, as `transformers` calls it (special-token strings parsed
  anywhere in the text, content included, as transformers does by default), with the
  library's own character offsets;
- SentencePiece, tekken and tiktoken ranks: the text is cut at the special-token strings
  the *template* wrote, which become their ids; the pieces between are encoded as text by
  `sentencepiece` / `tiktoken`, so a literal `</s>` or `[INST]` inside a message stays text,
  as these libraries (and mistral-common) encode it. Which occurrences are the template's
  is known by wrapping the ones in message contents in private-use markers before
  rendering, the way transformers' `sanitize_control_tokens` does; the markers are removed
  before encoding.

Character offsets (what the assistant mask is computed from) come from tokenizers
directly; for the piece-encoded families from each token's length in bytes (a table made
once per worker), checked against the text: a piece whose tokens do not add up to its
bytes is reported, never guessed.
"""

from __future__ import annotations

import json
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from curate.tokenizers.encoders import load_encoder
from curate.tokenizers.source import TokenizerSource

OPEN, CLOSE = "\ue000", "\ue001"  # wrap special-token strings found in message contents


class Unmappable(Exception):
    """A piece's tokens do not add up to its bytes (the tokenizer changed the text)."""


@dataclass
class Tokens:
    """One conversation: ids and each token's [start, end) characters in the text."""

    ids: np.ndarray  # int64
    starts: np.ndarray
    ends: np.ndarray


class ChatTokenizer(ABC):
    """Loaded once per worker; `encode` takes a batch of rendered conversations."""

    specials: dict[str, int]
    vocab_size: int
    library: str
    marks_content: bool  # whether contents must be marked before rendering

    @abstractmethod
    def encode(self, texts: list[str]) -> list[Tokens | Unmappable]:
        """Texts as rendered (with markers, when `marks_content`)."""

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


def vocab_size(source: TokenizerSource) -> int:
    """The number of ids, without building an encoder (tiktoken's takes a second)."""
    if source.kind == "tokenizer.json":
        import tokenizers

        tok = tokenizers.Tokenizer.from_file(str(source.main))
        return int(tok.get_vocab_size(with_added_tokens=True))
    return load_encoder(source).vocab_size


def load_chat_tokenizer(source: TokenizerSource, threads: int = 1) -> ChatTokenizer:
    if source.kind == "tokenizer.json":
        return HFChatTokenizer(source, threads)
    return PieceChatTokenizer(source, threads)


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

    def encode(self, texts: list[str]) -> list[Tokens | Unmappable]:
        out: list[Tokens | Unmappable] = []
        for enc in self.tok.encode_batch(texts, add_special_tokens=False) if texts else []:
            offsets = np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2)
            out.append(Tokens(np.asarray(enc.ids, np.int64), offsets[:, 0], offsets[:, 1]))
        return out


class PieceChatTokenizer(ChatTokenizer):
    marks_content = True

    def __init__(self, source: TokenizerSource, threads: int) -> None:
        self.encoder = load_encoder(source, threads=threads, warm=True)
        self.specials = dict(self.encoder.special)
        self.vocab_size = self.encoder.vocab_size
        self.library = self.encoder.library
        self.table = _byte_lengths(source, self.vocab_size)
        for token, i in self.specials.items():
            self.table[i] = len(token.encode())
        self.dummy = int(self.table[self._ids("x")].sum()) - 1  # SentencePiece's prefix space
        alternatives = alternation(self.specials)
        self.any_special = re.compile(alternatives)
        # texts rendered from marked contents; the others are searched with any_special
        # alone, which sre scans about 6x faster (it skips to the specials' first characters)
        self.split = re.compile(f"{OPEN}({alternatives}){CLOSE}|[{OPEN}{CLOSE}]|({alternatives})")

    def _ids(self, text: str) -> np.ndarray:
        return self.encoder.encode([text])[0].astype(np.int64)

    def mark(self, content: str) -> str:
        content = content.replace(OPEN, "").replace(CLOSE, "")
        return self.any_special.sub(lambda m: OPEN + m.group(0) + CLOSE, content)

    def encode(self, texts: list[str]) -> list[Tokens | Unmappable]:
        pieces: list[str] = []  # text between the template's special tokens, all texts
        piece_conv: list[int] = []  # the conversation each piece belongs to
        piece_at: list[int] = []  # where it starts in its conversation (characters)
        special: list[int] = []  # [id, start, ...] of the template's special tokens
        items: list[int] = []  # in text order: piece k as k, special j as -1 - j
        per_conv: list[int] = []  # items per conversation
        for c, text in enumerate(texts):
            first = len(items)
            buf: list[str] = []
            at = start = 0  # at: position in the rendered text; start: of the current piece
            pos = 0  # position in the text without markers
            marked = OPEN in text or CLOSE in text  # else every match is the template's
            for m in (self.split if marked else self.any_special).finditer(text):
                buf.append(text[at : m.start()])
                pos += m.start() - at
                at = m.end()
                if marked:
                    content_literal, template_special = m.group(1), m.group(2)
                else:
                    content_literal, template_special = None, m.group(0)
                if content_literal is not None:
                    buf.append(content_literal)
                    pos += len(content_literal)
                elif template_special is not None:
                    if piece := "".join(buf):
                        items.append(len(pieces))
                        pieces.append(piece)
                        piece_conv.append(c)
                        piece_at.append(start)
                    buf = []
                    items.append(-1 - len(special) // 2)
                    special += (self.specials[template_special], pos)
                    pos += len(template_special)
                    start = pos
            buf.append(text[at:])
            if piece := "".join(buf):
                items.append(len(pieces))
                pieces.append(piece)
                piece_conv.append(c)
                piece_at.append(start)
            per_conv.append(len(items) - first)
        return self._assemble(pieces, piece_conv, piece_at, special, items, per_conv)

    def _assemble(
        self, pieces: list[str], piece_conv: list[int], piece_at: list[int], special: list[int],
        items: list[int], per_conv: list[int],
    ) -> list[Tokens | Unmappable]:  # fmt: skip
        """Every piece encoded in one call, each token's characters from its length in
        bytes, and all tokens scattered to their place in text order (whole-batch numpy)."""
        p_ids, lengths, p_starts, p_ends, bad = self._piece_tokens(pieces, piece_conv, piece_at)
        item = np.asarray(items, dtype=np.int64)
        is_piece = item >= 0
        size = np.ones(len(item), np.int64)
        size[is_piece] = lengths
        offset = np.zeros(len(item) + 1, np.int64)
        np.cumsum(size, out=offset[1:])
        total = int(offset[-1])
        ids = np.empty(total, np.int64)
        starts = np.empty(total, np.int64)
        ends = np.empty(total, np.int64)
        if len(p_ids):
            first = np.zeros(len(lengths), np.int64)
            np.cumsum(lengths[:-1], out=first[1:])
            dest = np.arange(len(p_ids)) + np.repeat(offset[:-1][is_piece] - first, lengths)
            ids[dest], starts[dest], ends[dest] = p_ids, p_starts, p_ends
        if special:
            sp = np.asarray(special, dtype=np.int64).reshape(-1, 2)
            dest = offset[:-1][~is_piece]
            ids[dest], starts[dest] = sp[:, 0], sp[:, 1]
            ends[dest] = sp[:, 1] + self.table[sp[:, 0]]  # the special string's length
        item_end = np.cumsum(np.asarray(per_conv, dtype=np.int64))
        cuts = offset[item_end[:-1]]
        rows = np.stack([ids, starts, ends])
        out: list[Tokens | Unmappable] = [Tokens(*r) for r in np.split(rows, cuts, axis=1)]
        for c, exc in bad.items():
            out[c] = exc
        return out

    def _piece_tokens(
        self, pieces: list[str], piece_conv: list[int], piece_at: list[int]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[int, Unmappable]]:
        """(ids, tokens per piece, start, end in its conversation) of every piece token,
        and the conversations whose pieces' tokens do not add up to their bytes."""
        empty = np.empty(0, np.int64)
        if not pieces:
            return empty, empty, empty, empty, {}
        flat, lengths = self.encoder.encode(pieces)
        flat = flat.astype(np.int64)
        lengths = lengths.astype(np.int64)
        n_pieces = len(pieces)
        bounds = np.zeros(n_pieces + 1, np.int64)
        np.cumsum(lengths, out=bounds[1:])
        nonempty = lengths > 0
        sizes = self.table[flat]
        if self.dummy:
            sizes[bounds[:-1][nonempty]] -= self.dummy
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
        bad: dict[int, Unmappable] = {}
        for k in np.flatnonzero(wrong):
            bad.setdefault(
                piece_conv[k],
                Unmappable(f"tokens of {raw_len[k]} bytes add up to {int(total[k])}"),
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
        shift = np.repeat(np.asarray(piece_at, np.int64) - char_at[:-1], lengths)
        return flat, lengths, char_start + shift, char_end + shift, bad


def _byte_lengths(source: TokenizerSource, vocab_size: int) -> np.ndarray:
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
    if source.kind == "tekken":
        data = json.loads(source.main.read_text(encoding="utf-8"))
        offset = int(data["config"]["default_num_special_tokens"])
        for entry in data["vocab"][: vocab_size - offset]:
            b64 = entry["token_bytes"]  # its decoded length, without decoding it
            padding = len(b64) - len(b64.rstrip("="))
            table[offset + int(entry["rank"])] = 3 * len(b64) // 4 - padding
        return table
    from curate.tokenizers.tiktoken_bpe import read_ranks

    for token, rank in read_ranks(source.main).items():
        table[rank] = len(token)
    return table


def assistant_mask(tokens: Tokens, spans: list[tuple[int, int]]) -> np.ndarray:
    """1 on every token that overlaps an assistant span, as transformers' assistant mask
    (`return_assistant_tokens_mask`) marks them."""
    mask = np.zeros(len(tokens.ids), dtype=bool)
    for start, end in spans:
        mask |= (tokens.ends > start) & (tokens.starts < end)
    return mask.astype(np.uint8)

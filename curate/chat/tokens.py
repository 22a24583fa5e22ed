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

import base64
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
        self.split = re.compile(f"{OPEN}({alternatives}){CLOSE}|[{OPEN}{CLOSE}]|({alternatives})")

    def _ids(self, text: str) -> np.ndarray:
        return self.encoder.encode([text])[0].astype(np.int64)

    def mark(self, content: str) -> str:
        content = content.replace(OPEN, "").replace(CLOSE, "")
        return self.any_special.sub(lambda m: OPEN + m.group(0) + CLOSE, content)

    def encode(self, texts: list[str]) -> list[Tokens | Unmappable]:
        # Each conversation: [(text piece, start char) | (special id, start, end)], in order.
        layouts: list[list[tuple[Any, ...]]] = []
        pieces: list[str] = []
        for text in texts:
            layout: list[tuple[Any, ...]] = []
            buf: list[str] = []
            at = start = 0  # at: position in the rendered text; start: of the current piece
            pos = 0  # position in the text without markers
            for m in self.split.finditer(text):
                buf.append(text[at : m.start()])
                pos += m.start() - at
                at = m.end()
                content_literal, template_special = m.group(1), m.group(2)
                if content_literal is not None:
                    buf.append(content_literal)
                    pos += len(content_literal)
                elif template_special is not None:
                    if buf and (piece := "".join(buf)):
                        layout.append((len(pieces), start))
                        pieces.append(piece)
                    buf = []
                    layout.append((self.specials[template_special], pos, pos + len(m.group(2)), 0))
                    pos += len(template_special)
                    start = pos
            buf.append(text[at:])
            if piece := "".join(buf):
                layout.append((len(pieces), start))
                pieces.append(piece)
            layouts.append(layout)
        flat, lengths = self.encoder.encode(pieces) if pieces else (np.empty(0), np.empty(0))
        flat = flat.astype(np.int64)
        bounds = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=bounds[1:])
        return [self._assemble(layout, pieces, flat, bounds) for layout in layouts]

    def _assemble(
        self, layout: list[tuple[Any, ...]], pieces: list[str], flat: np.ndarray, bounds: np.ndarray
    ) -> Tokens | Unmappable:
        ids, starts, ends = [], [], []
        for item in layout:
            if len(item) == 4:  # a special token the template wrote
                ids.append(np.array([item[0]], np.int64))
                starts.append(np.array([item[1]], np.int64))
                ends.append(np.array([item[2]], np.int64))
                continue
            k, start = item
            piece_ids = flat[bounds[k] : bounds[k + 1]]
            try:
                s, e = self._offsets(pieces[k], piece_ids)
            except Unmappable as exc:
                return exc
            ids.append(piece_ids)
            starts.append(s + start)
            ends.append(e + start)
        if not ids:
            empty = np.empty(0, np.int64)
            return Tokens(empty, empty, empty)
        return Tokens(np.concatenate(ids), np.concatenate(starts), np.concatenate(ends))

    def _offsets(self, piece: str, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each token's [start, end) characters in the piece, from its length in bytes."""
        raw = piece.encode()
        sizes = self.table[ids]
        if len(sizes) and self.dummy:
            sizes = sizes.copy()
            sizes[0] -= self.dummy
        byte_ends = np.cumsum(sizes)
        if len(sizes) and (byte_ends[-1] != len(raw) or sizes.min() < 0):
            raise Unmappable(f"tokens of {len(raw)} bytes add up to {int(byte_ends[-1])}")
        byte_starts = byte_ends - sizes
        if len(raw) == len(piece):  # ASCII: bytes are characters
            return byte_starts, byte_ends
        lead = (np.frombuffer(raw, np.uint8) & 0xC0) != 0x80
        char_of = np.concatenate([np.cumsum(lead) - 1, [len(piece)]])
        # a token that ends inside a character holds that character (as tokenizers says)
        ends = np.where(sizes > 0, char_of[np.maximum(byte_ends - 1, 0)] + 1, char_of[byte_starts])
        return char_of[byte_starts], ends


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
            table[offset + int(entry["rank"])] = len(base64.b64decode(entry["token_bytes"]))
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

"""Long conversations encoded in pieces give the whole text's ids and mask (curate.chat.long_conversations).

The texts are ChatML conversations whose contents are the tokenizer identity tests' varied
strings (every script, digits, punctuation and whitespace runs, code, special-token
literals: inside contents `tokenizers` parses them as `apply_chat_template` does). Cut
every 64 characters instead of every 256 KiB, each text is cut hundreds of times, at
every kind of place the rule allows. The reference is the stage's whole-text encoding
(`HFChatTokenizer.encode` on texts too short to be cut): its ids and its mask, for the
assistant spans and for spans drawn anywhere, sorted or not, empty ones included.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from chat_fixtures import TEMPLATES, chat_tokenizer
from conftest import REPO

from curate.chat.long_conversations import chat_cuts_safely, encode_long, is_long
from curate.chat.tokens import Encoded, HFChatTokenizer, Span, load_chat_tokenizer
from curate.tokenizers.long_texts import PIECE_CHARS, cut_points
from curate.tokenizers.source import resolve_source

sys.path.insert(0, str(REPO / "tests" / "tokenizers"))
from split_bpe import IDEOGRAPHS, cjk_text, split_bpe_folder, tricky_text
from varied_strings import varied_strings

STRINGS = varied_strings(3000, seed=6)


def conversations(
    rng: random.Random, n: int, content: Callable[[], str] | None = None
) -> list[tuple[str, list[Span]]]:
    """Rendered ChatML texts with their assistant spans (content and <|im_end|>)."""
    out = []
    for _ in range(n):
        text, spans = "", []
        for _ in range(rng.randint(1, 4)):
            for role in ("user", "assistant"):
                if content is None:
                    words = (rng.choice(STRINGS) for _ in range(rng.randint(3, 30)))
                    message = rng.choice([" ", "\n", ""]).join(words)
                else:
                    message = content()
                text += f"<|im_start|>{role}\n"
                start = len(text)
                text += message + "<|im_end|>"
                if role == "assistant":
                    spans.append((start, len(text)))
                text += "\n"
        out.append((text, spans))
    return out


def drawn(rng: random.Random, text: str) -> list[Span]:
    points = sorted(rng.randrange(len(text) + 1) for _ in range(rng.choice([2, 4, 8])))
    return [(a, b) for a, b in zip(points[::2], points[1::2], strict=True) if b > a]


def variants(rng: random.Random, text: str, spans: list[Span]) -> list[list[Span]]:
    """The assistant's spans, spans drawn anywhere, and irregular ones (out of order, a
    duplicate, an empty one: decided span by span)."""
    other = drawn(rng, text)
    empty = rng.randrange(len(text) + 1)
    return [spans, other, [], other[::-1], [*spans, *spans[:1]], [*other, (empty, empty)]]


@pytest.mark.parametrize("which", ["sample_chat", "chat_fixtures", "llama3", "qwen2"])
def test_tokenizer_json_conversations_in_pieces_equal_whole(tmp_path: Path, which: str) -> None:
    """Llama 3's and Qwen2's layouts (a Split regex, then ByteLevel; Qwen2's with NFC) are
    also cut at every point the rule allows, in conversations of tricky texts too."""
    if which == "sample_chat":
        folder = REPO / "sample_data" / "chat" / "tokenizer"
    elif which == "chat_fixtures":
        folder = chat_tokenizer(tmp_path / "tok", TEMPLATES["chatml"], eos_token="</s>")
    else:
        folder = split_bpe_folder(tmp_path / "tok", which, TEMPLATES["chatml"])
    tok = load_chat_tokenizer(resolve_source(str(folder), str(tmp_path)))
    assert isinstance(tok, HFChatTokenizer) and tok.cuts
    rng = random.Random(11)
    size = 64 if which in ("sample_chat", "chat_fixtures") else 1
    texts = conversations(rng, 12)
    if size == 1:
        texts += conversations(rng, 12, lambda: tricky_text(rng, rng.randint(1, 60)))
        texts += conversations(rng, 12, lambda: cjk_text(rng, rng.randint(1, 200)))
    assert tok.marks == (size == 1)  # Llama 3's and Qwen2's: cut before MARKS too
    cuts = marked = compared = 0
    for text, spans in texts:
        assert len(text) < PIECE_CHARS and not is_long(text)  # the reference: whole texts
        cuts += len(cut_points(text, size, tok.marks))
        for found in variants(rng, text, spans):
            [whole] = tok.encode([text], [found])
            assert isinstance(whole, Encoded)
            ids, mask = encode_long(tok.tok, text, found, size=size, marks=tok.marks)
            assert ids.dtype == whole.ids.dtype and mask.dtype == whole.mask.dtype
            assert np.array_equal(ids, whole.ids)
            assert np.array_equal(mask, whole.mask), found
            marked += int(mask.sum())
            compared += len(ids)
    assert cuts > 1000
    assert 0 < marked < compared


def test_a_long_text_in_a_batch_keeps_its_place(tmp_path: Path) -> None:
    """Texts past PIECE_CHARS are cut by `encode`, the others encoded as before, in order."""
    tok = load_chat_tokenizer(resolve_source(str(REPO / "sample_data/chat/tokenizer"), ""))
    rng = random.Random(3)
    short = conversations(rng, 3)
    long_text, long_spans = "", []
    while len(long_text) <= PIECE_CHARS:
        text, spans = conversations(rng, 1)[0]
        long_spans += [(a + len(long_text), b + len(long_text)) for a, b in spans]
        long_text += text
    batch = [short[0], (long_text, long_spans), short[1], short[2]]
    got = tok.encode([t for t, _ in batch], [s for _, s in batch])
    assert isinstance(tok, HFChatTokenizer)
    tok.cuts = False  # the reference: every text whole
    reference = tok.encode([t for t, _ in batch], [s for _, s in batch])
    for a, b in zip(got, reference, strict=True):
        assert isinstance(a, Encoded) and isinstance(b, Encoded)
        assert np.array_equal(a.ids, b.ids) and np.array_equal(a.mask, b.mask)


def test_what_could_see_across_a_cut_is_never_cut() -> None:
    """Special tokens are parsed out of chat texts: one that holds whitespace, strips it
    or matches only as a word could see across a cut, so such a tokenizer encodes whole."""
    data = json.loads((REPO / "sample_data/chat/tokenizer/tokenizer.json").read_text())
    assert chat_cuts_safely(json.dumps(data))
    for change in ({"content": "<|im start|>"}, {"lstrip": True}, {"rstrip": True},
                   {"single_word": True}):  # fmt: skip
        tokens = [{**t, **change} if t["content"] == "<|im_start|>" else t
                  for t in data["added_tokens"]]  # fmt: skip
        assert not chat_cuts_safely(json.dumps({**data, "added_tokens": tokens})), change
    assert not chat_cuts_safely(json.dumps({**data, "normalizer": {"type": "NFC"}}))


def test_a_special_token_holding_a_mark_stops_cuts_in_split_layouts(tmp_path: Path) -> None:
    """Llama 3's and Qwen2's layouts are also cut before newlines and CJK punctuation, so a
    special token holding one (parsed out of chat texts) could see across such a cut."""
    folder = split_bpe_folder(tmp_path / "tok", "qwen2", TEMPLATES["chatml"])
    data = json.loads((folder / "tokenizer.json").read_text())
    assert chat_cuts_safely(json.dumps(data))
    for content in ("<|im\uff0cstart|>", "\u3002"):
        tokens = [{**t, "content": content} if t["content"] == "<|im_start|>" else t
                  for t in data["added_tokens"]]  # fmt: skip
        assert not chat_cuts_safely(json.dumps({**data, "added_tokens": tokens})), content


def test_a_long_text_without_spaces_is_cut_at_marks(tmp_path: Path) -> None:
    """In Qwen2's layout a long conversation in Chinese (no spaces: no cut before a space)
    is cut before its punctuation, with the ids and mask of the whole text."""
    folder = split_bpe_folder(tmp_path / "tok", "qwen2", TEMPLATES["chatml"])
    tok = load_chat_tokenizer(resolve_source(str(folder), str(tmp_path)))
    assert isinstance(tok, HFChatTokenizer) and tok.cuts and tok.marks
    rng = random.Random(5)

    def chinese(n: int) -> str:
        return "".join("".join(rng.choices(IDEOGRAPHS, k=rng.randint(5, 20))) + "\uff0c"
                       for _ in range(n // 12))  # fmt: skip

    text = f"<|im_start|>user\n{chinese(PIECE_CHARS)}<|im_end|>\n<|im_start|>assistant\n"
    start = len(text)
    text += f"{chinese(PIECE_CHARS)}<|im_end|>"
    spans = [(start, len(text))]
    text += "\n"
    assert not is_long(text) and is_long(text, marks=True)
    [got] = tok.encode([text], [spans])
    tok.cuts = False  # the reference: the whole text
    [whole] = tok.encode([text], [spans])
    assert isinstance(got, Encoded) and isinstance(whole, Encoded)
    assert np.array_equal(got.ids, whole.ids) and np.array_equal(got.mask, whole.mask)
    assert 0 < int(got.mask.sum()) < len(got.mask)

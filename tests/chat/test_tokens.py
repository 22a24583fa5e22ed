"""curate.chat.tokens: the assistant mask decided per piece equals the mask token by token.

Most pieces of a rendered conversation lie wholly inside or outside the assistant's spans,
and their mask is decided without token offsets; the others (a span begins or ends inside)
and every conversation whose spans are not sorted and disjoint are decided token by token,
from each token's characters. Both must give transformers' overlap rule, so the same texts
and spans are encoded twice, once with each conversation's spans made irregular (a
duplicate span, or an empty one: the union is unchanged) to force the token-by-token path.
Spans are drawn at random: on piece edges (SentencePiece's lone prefix-space token at a
span's first character overlaps nothing), and anywhere, inside multi-byte characters'
neighbourhoods too. The identity with the references is in tests/stages/test_chat_template.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest

from curate.chat.tokens import Encoded, Span, Unmappable, load_chat_tokenizer
from curate.tokenizers.source import resolve_source

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chat_fixtures import TEMPLATES, mistral_tokenizer

WORDS = ["1 2 3", "hello", " spaced", "naïve café", "日本語", "x\ny", "def f():\n    return 1",
         "[INST]", "</s>", "  ", "!", "é"]  # fmt: skip


def texts_and_spans(rng: random.Random, n: int) -> tuple[list[str], list[list[Span]]]:
    texts, spans = [], []
    for _ in range(n):
        parts, edges = ["<s>"], [3]
        for _ in range(rng.randint(1, 4)):
            user = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
            answer = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
            parts += ["[INST] ", user, " [/INST]"]
            edges.append(sum(map(len, parts)))
            parts += [answer, "</s>"]
            edges.append(sum(map(len, parts)))
            parts.append(rng.choice(["", "", "1 2", "3"]))  # SentencePiece: "▁" alone, then "1"
        text = "".join(parts)
        points = sorted({rng.choice(edges) if rng.random() < 0.6 else rng.randrange(len(text) + 1)
                         for _ in range(rng.choice([0, 2, 4, 6]))})  # fmt: skip
        found = [(a, b) for a, b in zip(points[::2], points[1::2], strict=False) if b > a]
        texts.append(text)
        spans.append(found)
    return texts, spans


def irregular(found: list[Span]) -> list[Span]:
    return [*found, found[-1]] if found else [(0, 0)]


@pytest.mark.parametrize("name", ["tokenizer.model.v1", "tekken_240911.json"])
def test_mask_by_piece_equals_mask_by_token(tmp_path: Path, name: str) -> None:
    folder = mistral_tokenizer(tmp_path / "tok", name, TEMPLATES["mistral"])
    tok = load_chat_tokenizer(resolve_source(str(folder), str(tmp_path)))
    texts, spans = texts_and_spans(random.Random(5), 400)
    fast = tok.encode(texts, spans)
    slow = tok.encode(texts, [irregular(s) for s in spans])
    marked = 0
    for a, b in zip(fast, slow, strict=True):
        assert isinstance(a, Encoded) and isinstance(b, Encoded)
        assert np.array_equal(a.ids, b.ids)
        assert np.array_equal(a.mask, b.mask)
        marked += int(a.mask.sum())
    assert 0 < marked < sum(len(a.ids) for a in fast if isinstance(a, Encoded))


def test_empty_batch_and_a_conversation_without_spans(tmp_path: Path) -> None:
    folder = mistral_tokenizer(tmp_path / "tok", "tekken_240911.json", TEMPLATES["mistral"])
    tok = load_chat_tokenizer(resolve_source(str(folder), str(tmp_path)))
    assert tok.encode([], []) == []
    [only] = tok.encode(["<s>[INST] a [/INST]b</s>"], [[]])
    assert isinstance(only, Encoded)
    assert only.mask.tolist() == [0] * len(only.ids)


def test_re2_alternation_finds_what_the_python_alternation_finds() -> None:
    """The stage scans contents with Arrow's RE2 and cuts texts with Python's `re`: both
    must see the same special strings, regex syntax and non-ASCII included."""
    import re

    import pyarrow as pa
    import pyarrow.compute as pc

    from curate.chat.tokens import alternation, re2_alternation

    specials = ["<s>", "</s>", "[INST]", "<|im_end|>", "a.b*", "x\ny", "<｜begin▁of▁sentence｜>",
                "\\d", "(?:", "{2}", "$^"]  # fmt: skip
    rng = random.Random(3)
    alphabet = "<>/[]|_.*\\(?:){}$^ads2xyn\n▁｜é"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(3000)]
    texts += [f"pre {s} post" for s in specials]
    python = re.compile(alternation(specials))
    got = pc.match_substring_regex(pa.array(texts), re2_alternation(specials)).to_pylist()
    assert got == [python.search(t) is not None for t in texts]
    assert sum(got) > 30
    assert re2_alternation([]) == ""


def test_tokenizer_json_mask_by_lookups_equals_the_overlap_rule(tmp_path: Path) -> None:
    """tokenizer.json: two lookups per span (and their neighbours sharing a character) give
    what transformers' loop over every token's offsets gives."""
    from chat_fixtures import chat_tokenizer

    from curate.chat.tokens import _overlapping

    folder = chat_tokenizer(tmp_path / "tok", TEMPLATES["chatml"], eos_token="</s>")
    tok = load_chat_tokenizer(resolve_source(str(folder), str(tmp_path)))
    texts, spans = texts_and_spans(random.Random(8), 400)
    texts = [t.replace("<s>", "<|im_start|>").replace("</s>", "<|im_end|>") for t in texts]
    spans = [
        [(a, b) for a, b in found if b <= len(t)] for t, found in zip(texts, spans, strict=True)
    ]
    spans[0] = [(2, 2)]  # empty: decided by the offsets
    got = tok.encode(texts, spans)
    reference = tok.tok.encode_batch(texts, add_special_tokens=False)  # type: ignore[attr-defined]
    marked = 0
    for encoded, enc, found in zip(got, reference, spans, strict=True):
        assert isinstance(encoded, Encoded)
        assert encoded.ids.tolist() == enc.ids
        assert encoded.mask.tolist() == _overlapping(enc, found).tolist()
        marked += int(encoded.mask.sum())
    assert marked > 1000
    assert tok.encode([], []) == []


@pytest.mark.parametrize(
    "name", ["tokenizer.model.v1", "mistral_instruct_tokenizer_241114.model.v7",
             "tekken_240911.json"],
)  # fmt: skip
def test_long_pieces_in_windows_give_the_mask_of_whole_pieces(tmp_path: Path, name: str) -> None:
    """A piece with more tokens than `window_tokens` is given its tokens' characters in
    windows (curate.chat.long_pieces): windows of 2 (a multi-byte character's byte tokens
    leave no boundary inside), 5 and 7 tokens give the ids, masks and reasons of whole
    pieces; U+2581 makes SentencePiece's tokens not add up (a reason, whole or in windows)."""
    folder = mistral_tokenizer(tmp_path / "tok", name, TEMPLATES["mistral"])
    tok = load_chat_tokenizer(resolve_source(str(folder), str(tmp_path)))
    texts, spans = texts_and_spans(random.Random(21), 300)
    texts = [t.replace("hello", "he\u2581llo") if i % 25 == 0 else t for i, t in enumerate(texts)]
    for i in range(0, 300, 30):  # a few long pieces: spans begin and end inside them
        words = " ".join(random.Random(i).choice(WORDS) for _ in range(400))
        texts[i] += words
        spans[i] = [*spans[i], (len(texts[i]) - len(words) + 7, len(texts[i]) - 9)]
        spans[i] = sorted(spans[i]) if i % 60 else spans[i][::-1]  # irregular ones too
    whole = tok.encode(texts, spans)
    assert sum(isinstance(w, Unmappable) for w in whole) >= (3 if name.endswith(".v1") else 0)
    for size in (2, 5, 7):
        tok.window_tokens = size  # type: ignore[attr-defined]
        got = tok.encode(texts, spans)
        for a, b in zip(got, whole, strict=True):
            if isinstance(b, Unmappable):
                assert isinstance(a, Unmappable) and str(a) == str(b)
                continue
            assert isinstance(a, Encoded) and isinstance(b, Encoded)
            assert np.array_equal(a.ids, b.ids)
            assert np.array_equal(a.mask, b.mask)

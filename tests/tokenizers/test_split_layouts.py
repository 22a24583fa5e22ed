"""Llama 3's and Qwen2's tokenizer.json layouts encode long texts in pieces with the whole
text's ids (curate.tokenizers.long_texts).

The tokenizers are trained here in each layout (a Split regex, then ByteLevel without a
regex; Qwen2's with NFC). The texts are made from what the patterns and NFC treat
specially (split_bpe.TRICKY) and from the identity tests' varied strings, and are cut at
every point the rule allows, not every 256 KiB. The reference is the same encoder on the
whole text. What the argument does not cover is shown to encode whole.
"""

from __future__ import annotations

import base64
import itertools
import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from split_bpe import (
    LAYOUTS,
    cjk_text,
    split_bpe_folder,
    train_split_bpe,
    tricky_text,
    tricky_texts,
)
from varied_strings import varied_strings

from curate.tokenizers.encoders import load_encoder
from curate.tokenizers.long_texts import MARKS, cut_points, cuts_safely, encode_in_pieces
from curate.tokenizers.source import resolve_source

STRINGS = varied_strings(1000, seed=21)
TEXTS = tricky_texts(150, seed=5) + [
    " ".join(STRINGS[i : i + 200]) for i in range(0, 1000, 200)
] + ["\n".join(STRINGS[::-1]), "".join(STRINGS[:200])] + [
    cjk_text(random.Random(k), 2000) for k in range(20)
]  # fmt: skip


@pytest.fixture(scope="module", params=sorted(LAYOUTS))
def encoder(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = split_bpe_folder(tmp_path_factory.mktemp(request.param), request.param)
    return load_encoder(resolve_source(str(folder), "", "auto"))


def test_both_layouts_are_cut(encoder: Any) -> None:
    assert encoder._cuts and encoder._marks


def test_pieces_cut_at_every_allowed_point_equal_the_whole(encoder: Any) -> None:
    encode = encoder._encode
    flat_w, len_w = encode(TEXTS)
    flat_p, len_p = encode_in_pieces(encode, TEXTS, size=1, marks=True)
    assert sum(len(cut_points(t, 1)) for t in TEXTS) > 10_000
    before_marks = sum(len(cut_points(t, 1, True)) - len(cut_points(t, 1)) for t in TEXTS)
    assert before_marks > 5_000
    assert np.array_equal(len_w, len_p)
    assert np.array_equal(flat_w, flat_p)


def in_pieces(encode: Any, text: str, cuts: list[int]) -> list[int]:
    flat, _ = encode([text[a:b] for a, b in itertools.pairwise([0, *cuts, len(text)])])
    return list(flat)


def test_cuts_the_rule_does_not_allow_change_ids(encoder: Any) -> None:
    """The comparison can fail: one character later (after the space, before the letter)
    or between two letters of a word, cuts change ids; so does a cut before a combining
    mark where NFC composes it."""
    encode = encoder._encode
    text = " ".join(STRINGS[:300])
    whole = list(encode([text])[0])
    assert in_pieces(encode, text, cut_points(text, 1)) == whole
    assert in_pieces(encode, text, [i + 1 for i in cut_points(text, 1)]) != whole
    cjk = cjk_text(random.Random(7), 3000)
    whole = list(encode([cjk])[0])
    at_marks = [i for i in cut_points(cjk, 1, True) if cjk[i] != " "]
    assert in_pieces(encode, cjk, at_marks) == whole
    assert in_pieces(encode, cjk, [i + 1 for i in at_marks]) != whole
    assert in_pieces(encode, cjk, [i - 1 for i in at_marks]) != whole
    word = "tokenizer tokenizer"
    assert in_pieces(encode, word, [14]) != list(encode([word])[0])
    if '"NFC"' in encoder.source.main.read_text():
        assert in_pieces(encode, "cafe\u0301", [4]) != list(encode(["cafe\u0301"])[0])


def test_nfc_never_composes_across_a_space_nor_makes_one() -> None:
    """For every code point c, with the library's own NFC: c between spaces normalizes as
    c alone (nothing before a space or after one composes with it, or moves across it),
    and a character that is not a space never ends as one."""
    from tokenizers.normalizers import NFC

    nfc = NFC()
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    alone = [nfc.normalize_str(c) for c in chars]
    assert nfc.normalize_str(" ".join(chars)) == " ".join(alone)
    assert nfc.normalize_str(" ".join(chars[::-1])) == " ".join(alone[::-1])
    assert not [c for c, a in zip(chars, alone, strict=True) if not c.isspace() and a[-1].isspace()]
    assert nfc.normalize_str("e\u0301 \u0301e") == "\u00e9 \u0301e"  # composes, not across
    for mark in MARKS:  # the same for the marks a cut may precede
        assert nfc.normalize_str(mark.join(chars)) == mark.join(alone), repr(mark)


def test_what_the_argument_does_not_cover_encodes_whole(tmp_path: Path) -> None:
    """Another pattern (even one spelled differently), a Split that drops or merges what it
    matches, a second regex, a prefix space, another normalizer, an added token holding a
    space: each makes the tokenizer encode whole texts, as before."""
    data = json.loads(train_split_bpe("qwen2").to_str())
    assert cuts_safely(json.dumps(data))
    split, byte_level = data["pre_tokenizer"]["pretokenizers"]
    llama_alt = split["pattern"]["Regex"].replace(
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)", "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
    )

    def pre(split_change: dict[str, object], byte_change: dict[str, object]) -> dict[str, object]:
        steps = [{**split, **split_change}, {**byte_level, **byte_change}]
        return {**data, "pre_tokenizer": {"type": "Sequence", "pretokenizers": steps}}

    unproven = [
        pre({"pattern": {"Regex": llama_alt}}, {}),
        pre({"pattern": {"Regex": r"\S+\s*"}}, {}),
        pre({"pattern": {"String": " "}}, {}),
        pre({"behavior": "MergedWithPrevious"}, {}),
        pre({"behavior": "Removed"}, {}),
        pre({"invert": True}, {}),
        pre({}, {"use_regex": True}),
        pre({}, {"add_prefix_space": True}),
        {**data, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split]}},
        {**data, "pre_tokenizer": {"type": "Sequence",
                                   "pretokenizers": [split, split, byte_level]}},
        {**data, "normalizer": {"type": "NFKC"}},
        {**data, "normalizer": {"type": "Lowercase"}},
        {**data, "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}]}},
        *({**data, "added_tokens": [*data["added_tokens"], {
            "id": 9999, "content": content, "special": False, "lstrip": False,
            "rstrip": False, "single_word": False, "normalized": False}]}
          for content in ("a b", "\u597d\uff0c", "x\nx")),
    ]  # fmt: skip
    for i, changed in enumerate(unproven):
        assert not cuts_safely(json.dumps(changed)), i
    # and the encoder reads the file so: an unproven file is encoded whole
    (tmp_path / "tokenizer.json").write_text(json.dumps(unproven[10]))
    enc = load_encoder(resolve_source(str(tmp_path / "tokenizer.json"), "", "auto"))
    assert not enc._cuts


def test_tricky_texts_hold_what_the_argument_is_about() -> None:
    """The texts cut above do hold every kind of neighbour a cut can have."""
    rng = random.Random(0)
    text = tricky_text(rng, 20_000)
    cuts = cut_points(text, 1)
    before = {text[i - 1] for i in cuts}
    assert {"\u0301", "\u0308", "\u0338", "'", ".", "1", "é", "好", "\U0001f600"} <= before
    assert {text[i + 1] for i in cuts} >= {"a", "w", "é", "e", "你", "П"}
    assert {"\x1c", "\x85", "\u2028", "\r"} <= set(text)


def byte_of_char() -> dict[str, int]:
    """GPT-2's byte-to-character table, reversed: a ByteLevel vocabulary's token as bytes."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1)]  # fmt: skip
    chars = {b: chr(b) for b in kept}
    moved = [b for b in range(256) if b not in chars]
    chars.update({b: chr(256 + n) for n, b in enumerate(moved)})
    return {c: b for b, c in chars.items()}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_tiktoken_ranks_with_either_pattern_are_cut(tmp_path: Path, layout: str) -> None:
    """Llama 3's original tokenizer.model is tiktoken ranks given `pattern:`: with Llama 3's
    or Qwen2's pattern, long texts are cut too, with the whole text's ids; another
    pattern (cl100k's, with possessive quantifiers) is not cut."""
    table = byte_of_char()
    vocab = train_split_bpe("llama3").get_vocab(with_added_tokens=False)
    ranks = {bytes(table[c] for c in token): i for token, i in vocab.items()}
    path = tmp_path / "llama3.tiktoken"
    lines = sorted((i, base64.b64encode(b).decode()) for b, i in ranks.items())
    path.write_text("".join(f"{b} {i}\n" for i, b in lines))
    source = resolve_source(str(path), "", "auto")
    enc = load_encoder(source, pattern=LAYOUTS[layout]["pattern"])
    assert enc._cuts
    flat_w, len_w = enc._encode(TEXTS)
    flat_p, len_p = encode_in_pieces(enc._encode, TEXTS, size=1, marks=True)
    assert np.array_equal(len_w, len_p)
    assert np.array_equal(flat_w, flat_p)
    word = "tokenizer tokenizer"
    assert in_pieces(enc._encode, word, [14]) != list(enc._encode([word])[0])
    cl100k = LAYOUTS["llama3"]["pattern"].replace("]?\\p{L}+", "]?+\\p{L}+")
    assert not load_encoder(source, pattern=cl100k)._cuts

"""Long documents encoded in pieces give the ids of the whole text (curate.tokenizers.long_texts).

The texts are the identity tests' varied strings (every script, digits, punctuation runs,
whitespace of every kind, code, special-token literals) joined into long documents; cut
every 64 characters instead of every 256 KiB, each document is cut hundreds of times, at
every kind of place the rule allows. The reference is the same encoder on the whole text.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_identity import mistral_data
from varied_strings import varied_strings

from curate.tokenizers.encoders import load_encoder
from curate.tokenizers.long_texts import cut_points, cuts_safely, encode_in_pieces
from curate.tokenizers.source import resolve_source

REPO = Path(__file__).resolve().parents[2]
STRINGS = varied_strings(3000, seed=14)
DOCUMENTS = [" ".join(STRINGS[i : i + 300]) for i in range(0, 3000, 300)] + [
    "\n".join(STRINGS[::-1]),
    "".join(STRINGS[:500]),
    "word " * 5000,
]


def whole_and_pieces(source: Path, drop_space: bool = False) -> tuple[object, object, int]:
    enc = load_encoder(resolve_source(str(source), str(REPO), "auto"), warm=True)
    whole = enc._encode(DOCUMENTS)  # type: ignore[attr-defined]
    pieces = encode_in_pieces(enc._encode, DOCUMENTS, size=64, drop_space=drop_space)  # type: ignore[attr-defined]
    cuts = sum(len(cut_points(d, 64)) for d in DOCUMENTS)
    return whole, pieces, cuts


def assert_same(whole: object, pieces: object, cuts: int) -> None:
    assert cuts > 1000
    (flat_w, len_w), (flat_p, len_p) = whole, pieces  # type: ignore[misc]
    assert np.array_equal(len_w, len_p)
    assert np.array_equal(flat_w, flat_p)


def test_byte_level_tokenizer_json_in_pieces_equals_whole() -> None:
    source = REPO / "sample_data" / "tokenizer" / "tokenizer.json"
    assert cuts_safely(source.read_text())
    assert_same(*whole_and_pieces(source))


@pytest.mark.parametrize("name", ["tekken_240718.json", "tekken_240911.json"])
def test_tekken_in_pieces_equals_whole(tmp_path: Path, name: str) -> None:
    shutil.copyfile(mistral_data() / name, tmp_path / "tekken.json")
    enc = load_encoder(resolve_source(str(tmp_path / "tekken.json"), "", "auto"))
    assert enc._cuts  # type: ignore[attr-defined]
    assert_same(*whole_and_pieces(tmp_path / "tekken.json"))


@pytest.mark.parametrize(
    "name",
    [
        "tokenizer.model.v1",
        "mistral_instruct_tokenizer_240216.model.v2",
        "mistral_instruct_tokenizer_240323.model.v3",
        "mistral_instruct_tokenizer_241114.model.v7",
    ],
)
def test_sentencepiece_in_pieces_equals_whole(tmp_path: Path, name: str) -> None:
    """Each piece after a cut without its space: the dummy prefix puts it back."""
    shutil.copyfile(mistral_data() / name, tmp_path / "tokenizer.model")
    enc = load_encoder(resolve_source(str(tmp_path / "tokenizer.model"), "", "auto"))
    assert enc._cuts  # type: ignore[attr-defined]
    assert_same(*whole_and_pieces(tmp_path / "tokenizer.model", drop_space=True))
    # kept, the space would be a token of its own: the reason it is dropped
    whole, kept, _ = whole_and_pieces(tmp_path / "tokenizer.model")
    assert not np.array_equal(whole[1], kept[1])  # type: ignore[index]


def test_what_could_see_across_a_cut_is_never_cut() -> None:
    """A prefix space added per call, a normalizer, an added token holding a space: what
    the argument for cutting does not cover, so such a tokenizer.json encodes whole texts."""
    data = json.loads((REPO / "sample_data" / "tokenizer" / "tokenizer.json").read_text())
    assert cuts_safely(json.dumps(data))
    prefixed = {**data, "pre_tokenizer": {**data["pre_tokenizer"], "add_prefix_space": True}}
    assert not cuts_safely(json.dumps(prefixed))
    assert not cuts_safely(json.dumps({**data, "normalizer": {"type": "NFC"}}))
    token = {"id": 9999, "content": "a b", "special": False, "lstrip": False, "rstrip": False}
    assert not cuts_safely(json.dumps({**data, "added_tokens": [token]}))


def test_cut_points_are_before_a_space_between_a_non_space_and_a_letter() -> None:
    text = "ab  cd\n ef gh 12 ij"
    assert cut_points(text, 1) == [10, 16]
    for doc in DOCUMENTS:
        for i in cut_points(doc, 64):
            assert doc[i] == " " and not doc[i - 1].isspace() and doc[i + 1].isalpha()

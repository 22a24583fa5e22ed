"""The vectorised shingles are exactly the plain-Python definition, byte for byte."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from curate.minhash.shingles import reference_shingles, shingle

PIECES = [
    "a", "B", "ü", "É", "\u00a0", "\u2003", " ", "  ", "\n", "\t", "\r\n", "İ", "ß", "日本",
    "\x1c", "\x85", "x" * 40, "Ω", "\u3000", "\U0001f600", "z", "\u200b", "\u2028", "word",
    "ΟΔΟΣ", "Σ", "\U00010400", "\ua7cb",
]  # fmt: skip


def varied_documents(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    docs = ["", " ", "\n\t ", "one", "two words", "a b c d e", "a b c d e f", "x" * 300]
    for _ in range(n):
        k = rng.choice([0, 1, 2, 3, 5, 8, 20, 60])
        docs.append("".join(rng.choice(PIECES) for _ in range(k)))
    return docs


def vectorised(docs: list[str], unit: str, size: int, low: bool) -> list[list[bytes]]:
    found = shingle(pa.array(docs), unit, size, low)
    raw = found.buffer.tobytes()
    out, at = [], 0
    for count in found.counts.tolist():
        pairs = zip(found.starts[at : at + count], found.lengths[at : at + count], strict=True)
        out.append([raw[s : s + n] for s, n in pairs])
        at += count
    return out


@pytest.mark.parametrize(
    "unit,size", [("word", 1), ("word", 3), ("word", 5), ("char", 1), ("char", 4)]
)
@pytest.mark.parametrize("low", [False, True])
def test_equals_reference(unit: str, size: int, low: bool) -> None:
    docs = varied_documents(600)
    assert vectorised(docs, unit, size, low) == [
        reference_shingles(d, unit, size, low) for d in docs
    ]


def test_words_never_cross_documents_and_empties_have_none() -> None:
    docs = ["end", "", "start here", "  ", "x"]
    assert vectorised(docs, "word", 2, False) == [[b"end"], [], [b"start here"], [], [b"x"]]


def test_fewer_words_than_size_is_one_shingle() -> None:
    assert vectorised(["only three  words\n"], "word", 5, True) == [[b"only three words"]]


def test_null_text_is_empty_and_chunked_input_works() -> None:
    chunked = pa.chunked_array([pa.array(["a b", None]), pa.array(["c d e"])])
    found = shingle(chunked, "word", 2, False)
    assert found.counts.tolist() == [1, 0, 2]

"""Signatures equal datasketch's MinHash values bit for bit, for the same shingles.

The test shingles each document itself, in plain Python (not with curate's reference
function), feeds the shingles to `datasketch.MinHash(hashfunc=xxhash.xxh32_intdigest)` and
compares every value with what curate computed from the text.
"""

from __future__ import annotations

import random
import struct

import numpy as np
import pyarrow as pa
import pytest
import xxhash
from datasketch import LeanMinHash, MinHash

from curate.minhash.hashes import hash_shingles, shingle_hash
from curate.minhash.signatures import signatures
from curate.stages.minhash_dedup import permutations

WORDS = [
    "the", "of", "Ünïcödé", "naïve", "日本語", "文字", "😀", "İstanbul", "STRASSE", "straße",
    "x" * 50, "-", "a", "Ω", "résumé", "Fußball", "ǅ", "\u0130", "tab", "end.", "ΟΔΟΣ", "Σ",
    "ΣΑΣ.", "\U00010400", "ꟋA",
]  # fmt: skip
GAPS = [" ", " ", " ", "  ", "\n", "\t", "\u00a0", "\u3000", "\r\n", "\x1c", "\u2009"]


def documents(n: int) -> list[str]:
    rng = random.Random(42)
    docs = ["", " ", "\n\n", "\u3000", "word", "two words", "a b c d", "a b c d e", "a b c d e f"]
    while len(docs) < n:
        k = rng.choice([1, 2, 4, 5, 6, 12, 40, 200])
        parts = []
        for _ in range(k):
            parts += [rng.choice(WORDS), rng.choice(GAPS)]
        docs.append(rng.choice(["", " ", "\n"]) + "".join(parts))
    return docs


def word_hash(shingle: bytes) -> int:
    """xxh32 of the words' xxh32 values (4 little-endian bytes each): curate's word hash."""
    return xxhash.xxh32_intdigest(
        b"".join(struct.pack("<I", xxhash.xxh32_intdigest(w)) for w in shingle.split(b" "))
    )


def python_shingles(text: str, unit: str, size: int, low: bool) -> list[bytes]:
    if low:
        text = text.lower()
    tokens = text.split()
    if unit == "char":
        tokens = list(" ".join(tokens))
    joiner = " " if unit == "word" else ""
    if not tokens:
        return []
    grams = [tokens[i : i + size] for i in range(max(1, len(tokens) - size + 1))]
    return [joiner.join(g).encode("utf-8") for g in grams]


@pytest.mark.parametrize(
    "unit,size,low,num_perm,seed",
    [("word", 5, True, 128, 1), ("word", 3, False, 64, 7), ("char", 5, True, 128, 3)],
)
def test_bit_for_bit_with_datasketch(
    unit: str, size: int, low: bool, num_perm: int, seed: int
) -> None:
    docs = documents(2500 if unit == "word" and size == 5 else 800)
    a, b = permutations(num_perm, seed)
    hashes, counts = hash_shingles(pa.array(docs), unit, size, low)
    sigs = signatures(hashes, counts, a, b)
    assert sigs.shape == (len(docs), num_perm) and sigs.dtype == np.uint32
    hashfunc = xxhash.xxh32_intdigest if unit == "char" else word_hash
    for text, sig in zip(docs, sigs, strict=True):
        m = MinHash(num_perm=num_perm, seed=seed, hashfunc=hashfunc)
        m.update_batch(python_shingles(text, unit, size, low))
        assert np.array_equal(m.hashvalues, sig), repr(text[:80])
        assert np.array_equal(LeanMinHash(m).hashvalues, sig)


def test_empty_documents_get_datasketchs_empty_signature() -> None:
    a, b = permutations(128, 1)
    hashes, counts = hash_shingles(pa.array(["", "   "]), "word", 5, True)
    sigs = signatures(hashes, counts, a, b)
    assert np.array_equal(sigs[0], MinHash(num_perm=128).hashvalues)
    assert (sigs == np.uint32(0xFFFFFFFF)).all()


def test_batch_split_does_not_change_signatures() -> None:
    docs = documents(300)
    a, b = permutations(128, 1)

    def sig(chunk: list[str]) -> np.ndarray:
        hashes, counts = hash_shingles(pa.array(chunk), "word", 5, True)
        return signatures(hashes, counts, a, b)

    assert np.array_equal(sig(docs), np.concatenate([sig(docs[:97]), sig(docs[97:])]))


def test_curates_plain_python_hash_is_the_one_used() -> None:
    for text in ("a b c d e f", "x", "日本 語", "one two three four five"):
        for sh in python_shingles(text, "word", 5, True):
            assert shingle_hash("word")(sh) == word_hash(sh)
    assert shingle_hash("char") is xxhash.xxh32_intdigest

"""The vectorised n-gram statistics equal a plain left-to-right reading of the words."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from curate.quality.docs import DocBatch
from curate.quality.ngrams import NGrams, Rolling, duplicated_ngram_chars, top_ngram_chars

VOCAB = ["a", "bb", "ccc", "dd", "e", "ffff"]


def scan_duplicates(words: list[str], n: int) -> int:
    seen: set[tuple[str, ...]] = set()
    chars, i = 0, 0
    while i < len(words) - n + 1:
        gram = tuple(words[i : i + n])
        if gram in seen:
            chars += sum(map(len, gram))
            i += n
        else:
            seen.add(gram)
            i += 1
    return chars


def top_chars(words: list[str], n: int) -> int:
    grams = [" ".join(words[i : i + n]) for i in range(len(words) - n + 1)]
    if not grams:
        return 0
    gram, count = Counter(grams).most_common(1)[0]
    return len(gram) * count


def stats(docs: list[list[str]], n: int) -> tuple[list[int], list[int]]:
    batch = DocBatch(__import__("pyarrow").array([" ".join(d) for d in docs]))
    words = batch.words
    alive = np.ones(batch.n, dtype=bool)
    grams = NGrams(Rolling(words), n, alive)
    dup = duplicated_ngram_chars(grams, batch.n, len(words.values))
    top = top_ngram_chars(grams, batch.n)
    return dup.tolist(), top.tolist()


docs_strategy = st.lists(
    st.lists(st.integers(0, len(VOCAB) - 1).map(VOCAB.__getitem__), max_size=60),
    min_size=1,
    max_size=8,
)


@settings(max_examples=150, deadline=None)
@given(docs=docs_strategy, n=st.integers(2, 6))
def test_random_documents_match_the_scan(docs: list[list[str]], n: int) -> None:
    dup, top = stats(docs, n)
    assert dup == [scan_duplicates(d, n) for d in docs]
    assert top == [top_chars(d, n) for d in docs]


def test_a_skipped_first_occurrence_is_not_remembered() -> None:
    # "x y" first appears only inside the skip after the repeated "a b": the scan never
    # remembers it, so its later copy is new, not a duplicate.
    words = ["a", "b", "a", "b", "x", "y", "q", "x", "y"]
    dup, _ = stats([words], 2)
    assert dup == [scan_duplicates(words, 2)]


def test_long_repetitive_document() -> None:
    words = (["a", "bb", "ccc"] * 300) + ["dd"] + (["e", "a"] * 200)
    for n in (5, 7, 10):
        dup, top = stats([words, words[::-1], []], n)
        assert dup == [scan_duplicates(words, n), scan_duplicates(words[::-1], n), 0]
        assert top[0] == top_chars(words, n)


def test_numpy_memory_per_word_stays_small() -> None:
    """Issue 14's 60 MB document (~12M words) must stay within 2 GB over an idle run, and
    every array here has one entry per word: the n-gram rules' numpy allocations at their
    peak, per word of the batch (156 bytes here; 268 when positions, document numbers,
    character counts and the scan's doubling tables were 64-bit and keys were mixed through
    temporaries)."""
    import tracemalloc

    from curate.quality import gopher_repetition
    from curate.quality.params import GopherRepetitionParams

    text = " ".join(VOCAB[(i * 7 + i // 5) % len(VOCAB)] + str(i % 97) for i in range(400_000))
    batch = DocBatch(pa.array([text, "a short one", text[:1000]]))
    words = len(batch.words.values)
    params = GopherRepetitionParams(dup_para_frac=None, dup_para_char_frac=None,
                                    dup_line_frac=None, dup_line_char_frac=None)  # fmt: skip
    tracemalloc.start()
    try:
        gopher_repetition.evaluate(batch, params, np.ones(batch.n, dtype=bool), shortcut=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak / words < 190, f"{peak / words:.0f} bytes per word"

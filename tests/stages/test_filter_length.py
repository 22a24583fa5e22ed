"""filter_length: bounds on characters and words, each drop with its reason."""

from __future__ import annotations

import pyarrow as pa
import pytest

from curate.stages.filter_length import FilterLength, FilterLengthParams


def run(texts: list[str], **params: object) -> tuple[list[str], list[tuple[str, str]]]:
    batch = pa.record_batch({"id": [str(i) for i in range(len(texts))], "text": texts})
    result = FilterLength(FilterLengthParams(**params)).process(batch)
    removed = result.removed.select(["id", "reason"]).to_pylist() if result.removed else []
    return result.batch.column("text").to_pylist(), [(r["id"], r["reason"]) for r in removed]


def test_chars_and_words() -> None:
    kept, removed = run(
        ["a", "two words", "one two three four", "x" * 50], min_chars=2, max_chars=40, min_words=2
    )
    assert kept == ["two words", "one two three four"]
    assert removed == [("0", "too_few_chars"), ("3", "too_many_chars")]


def test_words_split_on_unicode_whitespace_like_str_split() -> None:
    text = "a\u3000b\u00a0c\td"
    kept, _ = run([text], min_words=len(text.split()))
    assert kept == [text]
    _, removed = run([text], max_words=len(text.split()) - 1)
    assert removed == [("0", "too_many_words")]


def test_characters_not_bytes() -> None:
    kept, _ = run(["日本語"], max_chars=3)
    assert kept == ["日本語"]


def test_first_failing_rule_is_the_reason() -> None:
    _, removed = run([""], min_chars=1, min_words=1)
    assert removed == [("0", "too_few_chars")]


def test_min_above_max_is_rejected() -> None:
    with pytest.raises(ValueError, match="min_words"):
        FilterLengthParams(min_words=5, max_words=2)

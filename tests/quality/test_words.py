"""The word splitter splits English the way spaCy's tokenizer does, on the forms that matter."""

from __future__ import annotations

import polars as pl
import pytest

from curate.quality.words import WORD

CASES = [
    ("Hello, world!", ["Hello", ",", "world", "!"]),
    ("It's a well-known fact", ["It", "'s", "a", "well", "-", "known", "fact"]),
    ("don't stop", ["don", "'t", "stop"]),  # spaCy: do n't (same count and characters)
    ("(e.g. the U.S.) and i.e. this", ["(", "e.g.", "the", "U.S.", ")", "and", "i.e.", "this"]),
    ("see os.path and 3.14 or 1,000", ["see", "os.path", "and", "3.14", "or", "1,000"]),
    ("at 12:30 a:b a/b", ["at", "12:30", "a", ":", "b", "a", "/", "b"]),
    ("utf-8 x86_64 __init__", ["utf-8", "x86_64", "_", "_", "init", "_", "_"]),
    ("wait... what -- ok…", ["wait", "...", "what", "--", "ok", "…"]),
    ("'quoted' and “curly”", ["'", "quoted", "'", "and", "“", "curly", "”"]),
    ("#include C# $5 50%", ["#", "include", "C", "#", "$", "5", "50", "%"]),
    ("Mr. Smith met J. Doe.", ["Mr.", "Smith", "met", "J.", "Doe", "."]),
    ("see https://example.com/a?b=1.", ["see", "https://example.com/a?b=1", "."]),
    ("mail me@example.org now", ["mail", "me@example.org", "now"]),
    ("naïve café 東京タワー", ["naïve", "café", "東京タワー"]),
    # punctuation inside a chunk stays unless spaCy has an infix rule for it
    (
        "use -m or --zone=eu in /usr/bin",
        ["use", "-m", "or", "--zone", "=", "eu", "in", "/usr", "/", "bin"],
    ),
    (
        "foo(bar) and D(Generic[S]) x@.service",
        ["foo(bar", ")", "and", "D(Generic[S", "]", ")", "x@.service"],
    ),
    ("seed=/var/lib Load= https://", ["seed=/var", "/", "lib", "Load=", "https://"]),
]


def split(text: str) -> list[str]:
    return [w.strip() for w in pl.Series([text]).str.extract_all(WORD).to_list()[0]]


@pytest.mark.parametrize(("text", "words"), CASES)
def test_split(text: str, words: list[str]) -> None:
    assert split(text) == words


def test_whitespace_is_never_a_word() -> None:
    assert split("a \n\n\t b\u00a0c\u3000d") == ["a", "b", "c", "d"]

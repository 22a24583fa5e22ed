"""A trigger found with Python's `re` instead of `regex` finds exactly the same places."""

from __future__ import annotations

import re

import pytest

regex = pytest.importorskip("regex")
pytest.importorskip("presidio_analyzer")

from curate.pii.windows import SPECS  # noqa: E402

FLAGS = re.DOTALL | re.MULTILINE | re.IGNORECASE  # Presidio's default for its recognizers


@pytest.mark.parametrize("name", [n for n, s in SPECS.items() if s.stdlib_trigger])
def test_stdlib_trigger_matches_every_character_as_regex_does(name: str) -> None:
    """Per code point, each one-character class of the trigger (case folding included) is
    the same set in both engines; so are the matches on text built from those characters."""
    trigger = SPECS[name].trigger
    classes = set(re.findall(r"\[[^\]]*\]|\\.|[^|\\[\]{}()?*+]", trigger))
    assert classes
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    for cls in classes:
        a, b = re.compile(cls, FLAGS), regex.compile(cls, FLAGS)
        got = [c for c in chars if a.fullmatch(c)]
        assert got == [c for c in chars if b.fullmatch(c)], cls
    sample = "".join(sorted({c for cls in classes for c in chars if re.fullmatch(cls, c, FLAGS)}))
    text = "".join(sample[(i * 7919) % len(sample)] + ":.ſK"[i % 4] for i in range(5000))
    a, b = re.compile(trigger, FLAGS), regex.compile(trigger, FLAGS)
    assert [m.span() for m in a.finditer(text)] == [m.span() for m in b.finditer(text)]

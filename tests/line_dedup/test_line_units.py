"""A document's units: what counts, and the text rebuilt byte for byte without some."""

from __future__ import annotations

import random

import pytest

from curate.line_dedup.units import pieces, unit_hashes, without


@pytest.mark.parametrize(
    ("text", "remove", "expected"),
    [
        ("a\nNAV\nb", {1}, "a\nb"),
        ("NAV\na", {0}, "a"),
        ("a\nNAV", {1}, "a"),
        ("a\nNAV\n", {1}, "a\n"),
        ("a\r\nNAV\r\nb", {1}, "a\r\nb"),
        ("  a\n\n\tb  ", set(), "  a\n\n\tb  "),
        ("a\n\nb\nc", {0, 2}, "\nb"),  # blank lines are never counted nor removed
    ],
)
def test_lines_removed_and_the_rest_kept_byte_for_byte(
    text: str, remove: set[int], expected: str
) -> None:
    assert without(text, "line", 1, remove)[0] == expected


def test_paragraphs_are_separated_by_blank_lines() -> None:
    text = "Nav bar\nsecond line\n\nBody one\n \t\nBody two\n\n\nFooter\n"
    units, seps = pieces(text, "paragraph")
    assert units == ["Nav bar\nsecond line", "Body one", "Body two", "Footer\n"]
    assert seps == ["\n\n", "\n \t\n", "\n\n\n"]
    assert without(text, "paragraph", 1, {0, 3})[0] == "Body one\n \t\nBody two"
    assert without(text, "paragraph", 1, {1})[0] == "Nav bar\nsecond line\n\nBody two\n\n\nFooter\n"


def test_stripped_units_compare_equal_and_short_ones_do_not_count() -> None:
    a, n = unit_hashes("  Home | About\n}\n\nText", "line", 2)
    b, _ = unit_hashes("Home | About\r\n}\nText  ", "line", 2)
    assert n == 3 and len(a) == 2  # "}" is non-blank but shorter than min_chars
    assert a == b
    assert without("Home | About\n}\nText", "line", 2, {0})[0] == "}\nText"


def test_removing_nothing_gives_the_text_back() -> None:
    rng = random.Random(3)
    alphabet = "ab \n\t\r\u00a0é"
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(30)))
        for unit in ("line", "paragraph"):
            assert without(text, unit, 1, set()) == (text, 0)
            units, seps = pieces(text, unit)
            assert "".join(u + s for u, s in zip(units, [*seps, ""], strict=True)) == text

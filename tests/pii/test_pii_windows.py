"""A trigger found with Python's `re` instead of `regex` finds exactly the same places."""

from __future__ import annotations

import random
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


def _recognizers() -> dict[str, object]:
    from curate.pii.analyzer import Analysis, AnalyzerConfig

    plain = Analysis(AnalyzerConfig(("en",), ("IBAN_CODE", "CRYPTO", "IP_ADDRESS", "US_SSN",
                                             "CREDIT_CARD", "EMAIL_ADDRESS"), 0.0, fast=False))  # fmt: skip
    return {type(r).__name__: r for r in plain.engine.registry.recognizers}


def _texts(rng: random.Random, n: int) -> list[str]:
    """Fuzz, with values at the longest and shortest the patterns allow."""
    alnum = "ABCDXYZabcxyz0123456789"
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 8)):
            kind = rng.randrange(5)
            if kind == 0:  # IBAN-like: 2 letters, 2 digits, up to 7 groups of 4, a group of 3
                groups = "".join(rng.choice(["", " ", "-"]) + "".join(rng.choices(alnum[:7] + alnum[13:], k=4))
                                 for _ in range(rng.randint(2, 7)))  # fmt: skip
                parts.append("GB82" + groups + rng.choice(["", " 12", "-A1B"]))
            elif kind == 1:  # crypto-like: bc1, 1 or 3, then 25 to 59 of its class
                parts.append(
                    rng.choice(["bc1", "1", "3"])
                    + "".join(rng.choices(alnum, k=rng.randint(24, 60)))
                )
            elif kind == 2:
                parts.append(rng.choice(["192.168.0.1", "fe80::1%eth0", "::ffff:10.0.0.1", "123-45-6789",
                                         "123 45 6789", "x@example.com", "4111 1111 1111 1111"]))  # fmt: skip
            else:
                parts.append(
                    "".join(rng.choice(alnum + " -.:@/%\n") for _ in range(rng.randint(0, 30)))
                )
        out.append(rng.choice(["", " ", "x"]).join(parts))
    return out


def test_every_match_lies_in_a_slice_and_passes_the_gate() -> None:
    """What windowing and gating rest on, checked on the raw pattern matches (before any
    checksum): a text with a match has a trigger, and each match lies inside one slice."""
    from curate.pii.windows import Windowed, spec_for

    rng = random.Random(3)
    texts = _texts(rng, 1500)
    checked = 0
    for name, rec in _recognizers().items():
        spec = spec_for(rec)
        if spec is None:
            continue
        windowed = Windowed(rec, spec)  # type: ignore[arg-type]
        flags = rec.global_regex_flags  # type: ignore[attr-defined]
        patterns = [regex.compile(p, flags) for p in spec.patterns]
        for text in texts:
            spans = [m.span() for p in patterns for m in p.finditer(text)]
            if not spans:
                continue
            checked += 1
            assert windowed.has_trigger(text), (name, text)
            if spec.run is None and spec.reach is None:
                continue
            slices = windowed.slices(text)
            for a, b in spans:
                assert any(x <= a and b <= y for x, y in slices), (name, text, (a, b))
    assert checked > 500

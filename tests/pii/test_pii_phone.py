"""The shared phone matcher keeps phonenumbers' retry budget exactly, shortcut included."""

from __future__ import annotations

import random

import pytest

phonenumbers = pytest.importorskip("phonenumbers")
pytest.importorskip("presidio_analyzer")

from phonenumbers import PhoneNumberMatcher  # noqa: E402

from curate.pii.phone import (  # noqa: E402
    SharedPhone,
    _hopeless,
    _Scan,
    _SharedMatcher,
    _tries_when_nothing_parses,
)

PIECES = ["1", "12", "3.4", "(5)", "2024-01-05", "+44 20 7946 0958", "07700 900123", "ext. 12",
          "x9", "12/31/99", "1999 10:30:12", "4-5-6", "(212) 555-0100", "٣٤٥", "１２３", "a1b2"]  # fmt: skip


def texts(n: int) -> list[str]:
    rng = random.Random(5)
    return [
        " ".join(rng.choice(PIECES) + rng.choice(["", ",", ";", " and", ":07"]) for _ in range(60))
        for _ in range(n)
    ]


@pytest.mark.parametrize("budget", [3, 40, 65535])
def test_matches_equal_phonenumbers_under_any_retry_budget(budget: int) -> None:
    verdicts: dict = {}  # per region, as SharedPhone keeps them
    for text in texts(12):
        scan = _Scan(text)
        for region in ("US", "GB", "DE", "IN"):
            plain = PhoneNumberMatcher(text, region, leniency=1, max_tries=budget)
            want = [(m.start, m.end) for m in plain]
            m = _SharedMatcher(text, region, 1)
            m._max_tries = budget
            got = [
                (x.start, x.end)
                for x in SharedPhone.matches(scan, m, verdicts.setdefault(region, {}))
            ]
            assert got == want, (text, region, budget)
            assert m._max_tries == plain._max_tries


def test_retries_replayed_for_hopeless_candidates() -> None:
    for piece in [*PIECES, "1-2-3", "(1) 2 (3)", "1/2/3", "12 34", "1 x 2"]:
        if not _hopeless(piece):
            continue
        m = PhoneNumberMatcher(piece, "US", leniency=1)
        before = m._max_tries
        assert m._extract_match(piece, 0) is None
        assert before - m._max_tries == _tries_when_nothing_parses(piece, False), piece


MATCHY = ["+44 20 7946 0958", "(212) 555-0100", "030 901820", "+49 30 901820", "07700 900123",
          "+1 415 555 2671", "2024-01-05", "3.4", "12", "98765 43210", "+55 11 91234-5678"]  # fmt: skip


def dense_texts(n: int) -> list[str]:
    """Texts where regions find different numbers, so that they leave the lockstep and
    meet again."""
    rng = random.Random(7)
    pieces = PIECES + MATCHY * 2
    return [
        " ".join(rng.choice(pieces) + rng.choice(["", ",", ";", " and", ":07", " x"])
                 for _ in range(rng.randint(1, 80)))
        for _ in range(n)
    ]  # fmt: skip


@pytest.mark.parametrize("budget", [1, 2, 5, 17, 65535])
def test_lockstep_equals_each_regions_own_matcher(budget: int) -> None:
    """All regions walked together (shared candidates, verdicts that no region parses
    remembered once) give each region exactly what its own PhoneNumberMatcher gives."""
    regions = ("US", "GB", "DE", "FR", "IL", "IN", "CA", "BR")
    verdicts: dict = {}
    silent: dict = {}
    for text in dense_texts(40) + texts(10):
        want = sorted(
            (region, m.start, m.end)
            for region in regions
            for m in PhoneNumberMatcher(text, region, leniency=1, max_tries=budget)
        )
        group = []
        for region in regions:
            m = _SharedMatcher(text, region, 1)
            m._max_tries = budget
            group.append((m, verdicts.setdefault(region, {})))
        found = SharedPhone.lockstep(_Scan(text), group, silent)
        assert sorted((region, x.start, x.end) for region, x in found) == want, (text, budget)
    assert silent  # the shortcut was taken

"""A part `phone_filter` rules out never parses into a number the matcher keeps."""

from __future__ import annotations

import random

import pytest

phonenumbers = pytest.importorskip("phonenumbers")
pytest.importorskip("presidio_analyzer")

from phonenumbers import PhoneNumberMatcher  # noqa: E402

from curate.pii.phone_filter import RegionFilter, digits, part, parts  # noqa: E402

PRESIDIO = ("US", "GB", "DE", "FR", "IL", "IN", "CA", "BR")  # the phone recognizer's regions
# and some with national prefix transform rules, prefixes that match nothing, shared codes
REGIONS = (*PRESIDIO, "AR", "JP", "SM", "AG", "RU", "CN")
# Numbers each region accepts in national form, with and without the prefixes, codes and
# extensions that change how parse reads them, and the years, dates, versions and ids
# that fill real text.
VALID = ["(212) 555-0100", "212 555 0100", "1 212 555 0100", "011 44 20 7946 0958",
         "020 7946 0958", "44 20 7946 0958", "00 44 20 7946 0958", "030 901820",
         "49 30 901820", "0049 30 901820", "30 901820", "01 23 45 67 89", "33 1 23 45 67 89",
         "03-1234567", "972 3 1234567", "098765 43210", "98765 43210", "91 98765 43210",
         "0 11 15 2345 6789", "(11) 91234-5678", "0 15 11 91234 5678", "011 2345 6789",
         "03-1234-5678", "0549 886377", "886377", "268 460 1234", "8 800 555 35 35",
         "010 1234 5678", "212 555 0100, 12", "030 901820 #12", "212-555-0100 ~ 7",
         "07700 900123", "212 555 0100;ext=5"]  # fmt: skip
NOISE = ["2024-01-05", "1996-2019", "2000-2015", "3.4.1", "2003", "0x", "1 2 3 4 5 6 7",
         "12/31/99", "(2) 3", "٣٤٥ ٦٧٨٩", "１２３ ４５６７", "2121, #2540", "0012394164",
         "1000000000000000000", "2.18.2", "- 42", "(5)", "604967 2.22.3"]  # fmt: skip


def pieces(n: int) -> list[str]:
    rng = random.Random(11)
    out = VALID + NOISE
    for _ in range(n):
        a, b = rng.choice(VALID + NOISE), rng.choice(VALID + NOISE)
        out.append(a + rng.choice([" ", "-", ". ", " / ", ", ", " (", ") "]) + b)
        out.append("".join(rng.choice("0123456789 -().0") for _ in range(rng.randint(4, 18))))
    return out


@pytest.mark.parametrize("region", REGIONS)
def test_a_part_ruled_out_never_parses(region: str) -> None:
    rf = RegionFilter(region)
    ruled_out = valid = 0
    for piece in pieces(400):
        found = PhoneNumberMatcher(piece, region, leniency=1)._parse_and_verify(piece, 0)
        if rf.cannot(part(piece)):
            ruled_out += 1
            assert found is None, (region, piece)
        valid += found is not None
    assert valid  # numbers were met
    assert ruled_out or region not in PRESIDIO  # and ruled out where it counts


@pytest.mark.parametrize("region", REGIONS)
def test_a_candidate_ruled_out_has_no_match_in_any_part(region: str) -> None:
    rf = RegionFilter(region)
    for piece in pieces(400):
        if rf.cannot(parts(piece)):
            matcher = PhoneNumberMatcher(piece, region, leniency=1)
            assert matcher._extract_match(piece, 0) is None, (region, piece)


def test_what_it_rules_out() -> None:
    """Not vacuous: years and dates are ruled out, numbers as written are not."""
    de, us = RegionFilter("DE"), RegionFilter("US")
    assert de.usable and us.usable
    for noise in ["2003", "1996-2019", "2000-2015", "2024-01-05"]:
        assert de.cannot(parts(noise)) and us.cannot(parts(noise)), noise
    assert not de.cannot(parts("030 901820")) and not us.cannot(parts("(212) 555-0100"))
    assert parts("0x12") is None and parts("+49 30 901820") is None  # letters, plus: parse
    assert digits("１２３-45") == "12345" == digits("123-45")

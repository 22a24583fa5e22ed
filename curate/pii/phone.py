"""Presidio's phone recognizer, with phonenumbers' work shared and remembered.

Presidio runs `phonenumbers.PhoneNumberMatcher` once per region (eight by default), and
each matcher scans the text and parses and validates every digit run it meets: on real
text that is most of plain Presidio's time. Two facts make most of that work repeat:

- The candidates a matcher meets depend only on where it searches from, not on the
  region, so one scan of a document serves all eight matchers (`_Scan`).
- The verdict on a candidate (`_extract_match`) depends only on the candidate's
  characters, the region and leniency, whether the characters just before and after it
  are Latin letters or currency/percent signs, and whether a time-stamp suffix follows.
  Years, versions and section numbers repeat across a corpus, so verdicts are
  remembered per region on exactly that key. The matcher's retry budget is honoured: a
  verdict is reused only when the budget left exceeds what it consumed, and stored only
  when the budget was never exhausted.

The matcher's search order and its retry accounting are otherwise its own, so the
matches are the ones the plain matcher finds. The explanation text Presidio builds for
each match (a second parse to name the region) is skipped: results carry it only when
`return_decision_process` is asked for, and curate never asks.

phonenumbers' private matcher methods are used here; its version enters the stage's
fingerprint, and tests compare this recognizer with Presidio's on varied and fuzzed text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import phonenumbers
from phonenumbers.phonenumbermatcher import (
    _INNER_MATCHES,
    _LEAD_PATTERN,
    _PATTERN,
    _SLASH_SEPARATED_DATES,
    _TIME_STAMPS,
    _TIME_STAMPS_SUFFIX,
    PhoneNumberMatch,
    PhoneNumberMatcher,
)
from phonenumbers.phonenumberutil import (
    _PLUS_CHARS,
    _SECOND_NUMBER_START_PATTERN,
    normalize_digits_only,
)
from presidio_analyzer import EntityRecognizer, RecognizerResult
from presidio_analyzer.predefined_recognizers import PhoneRecognizer

_MEMO_LIMIT = 1 << 18
_BAD_CHAR: dict[str, bool] = {}

Key = tuple[str, bool, bool, bool]


def _bad(char: str) -> bool:
    """The matcher's test of a neighbouring character, memoised per character."""
    known = _BAD_CHAR.get(char)
    if known is None:
        known = bool(
            PhoneNumberMatcher._is_invalid_punctuation_symbol(char)
            or PhoneNumberMatcher._is_latin_letter(char)
        )
        if len(_BAD_CHAR) < 65536:
            _BAD_CHAR[char] = known
    return known


def _shortest_valid() -> int:
    """The fewest digits any valid number has, in any region (0: unknown, no shortcut).

    `is_valid_number` requires the national significant number's length to be one of its
    region's possible lengths (when the metadata lists them).
    """
    from phonenumbers import PhoneMetadata

    shortest = 10**6
    regions = [PhoneMetadata.metadata_for_region(r) for r in phonenumbers.SUPPORTED_REGIONS]
    regions += [
        PhoneMetadata.metadata_for_nongeo_region(c)
        for c in phonenumbers.COUNTRY_CODES_FOR_NON_GEO_REGIONS
    ]
    for md in regions:
        desc = md.general_desc if md is not None else None
        lengths = [n for n in (desc.possible_length if desc is not None else ()) if n > 0]
        if not lengths:
            return 0
        shortest = min(shortest, *lengths)
    return shortest


_SHORTEST = _shortest_valid()


def _hopeless(candidate: str) -> bool:
    """No substring of the candidate can parse into a valid number in any region.

    Letters count as digits (phonenumbers maps vanity letters to digits).
    """
    return sum(1 for c in candidate if c.isdigit() or c.isalpha()) < _SHORTEST


class _Region:
    """What a region's parse can make of a candidate written without an international prefix.

    Without a plus sign or the region's international (IDD) prefix, `parse` gives the number
    the region's own calling code, and the national significant number is made of the
    candidate's digits (fewer, once a national prefix or the calling code is stripped; a
    prefix transform rule may add at most the digits it spells). `is_valid_number` then
    needs that length among the possible lengths of a region with this calling code. So a
    candidate with fewer digits than the shortest of those, and with no plus sign and no
    IDD prefix anywhere in its digits, cannot match in this region (nor can any part of it).
    """

    def __init__(self, region: str) -> None:
        from phonenumbers import PhoneMetadata
        from phonenumbers.phonenumberutil import COUNTRY_CODE_TO_REGION_CODE

        md = PhoneMetadata.metadata_for_region(region)
        self.shortest = 0  # 0: nothing known, no shortcut
        self.idd = None
        if md is None or not md.international_prefix:
            return
        lengths = []
        for other in COUNTRY_CODE_TO_REGION_CODE.get(md.country_code or 0, ()):
            om = PhoneMetadata.metadata_for_region(other)
            desc = om.general_desc if om is not None else None
            found = [n for n in (desc.possible_length if desc is not None else ()) if n > 0]
            if not found:
                return
            lengths.append(min(found))
        extra = sum(c.isdigit() for c in md.national_prefix_transform_rule or "")
        self.idd = re.compile(md.international_prefix)
        self.shortest = max(0, min(lengths, default=0) - extra)

    def hopeless(self, candidate: str) -> bool:
        if self.idd is None:
            return False
        # Letters may turn into digits (vanity numbers), and so into an IDD prefix: no shortcut.
        if any(c.isalpha() for c in candidate) or any(p in candidate for p in _PLUS_CHARS):
            return False
        if sum(1 for c in candidate if c.isdigit()) >= self.shortest:
            return False
        return self.idd.search(normalize_digits_only(candidate)) is None


_REGIONS: dict[str, _Region] = {}


def _region(region: str) -> _Region:
    known = _REGIONS.get(region)
    if known is None:
        known = _REGIONS[region] = _Region(region)
    return known


def _tries_when_nothing_parses(candidate: str, timestamp_follows: bool) -> int:
    """The retries `PhoneNumberMatcher._extract_match` spends on a candidate none of whose
    parses succeeds (the same branches, with every `_parse_and_verify` failing)."""
    if _SLASH_SEPARATED_DATES.search(candidate):
        return 0
    if timestamp_follows and _TIME_STAMPS.search(candidate):
        return 0
    used = 0
    for inner in _INNER_MATCHES:
        group = inner.search(candidate)
        if group is not None:
            used += 1  # the part before the first group
        while group is not None:
            used += 1
            group = inner.search(candidate, group.start() + 1)
    return used


class _Scan:
    """The candidates of one text by search position, shared by every region's matcher."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.found: dict[int, tuple[int, str, Key] | None] = {}

    def next(self, index: int) -> tuple[int, str, Key] | None:
        if index in self.found:
            return self.found[index]
        text = self.text
        hit = _PATTERN.search(text, index)
        result = None
        if hit is not None:
            start = hit.start()
            candidate = text[start : hit.end()]
            trailing = _SECOND_NUMBER_START_PATTERN.search(candidate)
            if trailing:
                candidate = candidate[: trailing.start()]
            end = start + len(candidate)
            key = (
                candidate,
                start > 0 and _bad(text[start - 1]),
                end < len(text) and _bad(text[end]),
                _TIME_STAMPS_SUFFIX.match(text, end) is not None,
            )
            result = (start, candidate, key)
        self.found[index] = result
        return result


class _SharedMatcher(PhoneNumberMatcher):
    """A matcher used for its state (text, region, leniency, retry budget) and its
    `_extract_match`; `SharedPhone.matches` does the iteration.

    `_parse_and_verify` (one parse of a candidate or of a part of it) is remembered too:
    its verdict depends only on the part's characters, the region and leniency, and
    whether the characters around it are Latin letters or currency/percent signs.
    Parts such as "2.2.27" recur inside candidates that differ ("2.2.27-1", "2.2.27-2").
    """

    def __init__(
        self, text: str, region: str, leniency: int, parts: dict[Any, Any] | None = None
    ) -> None:
        super().__init__(text, region, leniency=leniency)
        self._parts = parts if parts is not None else {}

    def _parse_and_verify(self, candidate: str, offset: int) -> PhoneNumberMatch | None:
        text = self.text
        prev_bad = offset > 0 and not _LEAD_PATTERN.match(candidate) and _bad(text[offset - 1])
        end = offset + len(candidate)
        key = (candidate, prev_bad, end < len(text) and _bad(text[end]))
        if key in self._parts:
            number = self._parts[key]
            return None if number is None else PhoneNumberMatch(offset, candidate, number)
        match = super()._parse_and_verify(candidate, offset)
        if len(self._parts) >= _MEMO_LIMIT:
            self._parts.clear()
        self._parts[key] = None if match is None else match.number
        return match


class SharedPhone:
    """Replaces a `PhoneRecognizer`'s `analyze`: same matches, shared scan, remembered verdicts.

    Patched per instance, so the recognizer's id, context and thresholds stay its own.
    """

    def __init__(self, recognizer: PhoneRecognizer) -> None:
        self.recognizer = recognizer
        self.verdicts: dict[tuple[str, int], dict[Key, Any]] = {}
        self.parts: dict[tuple[str, int], dict[Any, Any]] = {}

    def __call__(
        self, text: str, entities: list[str], nlp_artifacts: Any = None, **kwargs: Any
    ) -> list[RecognizerResult]:
        r = self.recognizer
        leniency = int(r.leniency or 0)
        results = []
        scan = _Scan(text)
        for region in r.supported_regions:
            verdicts = self.verdicts.setdefault((region, leniency), {})
            parts = self.parts.setdefault((region, leniency), {})
            matcher = _SharedMatcher(text, region, leniency, parts)
            for match in self.matches(scan, matcher, verdicts):
                results.append(r._get_recognizer_result(match, text, region, nlp_artifacts))
        return EntityRecognizer.remove_duplicates(results)

    @staticmethod
    def matches(
        scan: _Scan, m: _SharedMatcher, verdicts: dict[Key, Any]
    ) -> Iterator[PhoneNumberMatch]:
        """PhoneNumberMatcher's iteration (`has_next` and `_find`), one loop, verdicts reused."""
        found = scan.found
        region = _region(m.preferred_region or "ZZ")
        index = 0
        while m._max_tries > 0:
            hit = found[index] if index in found else scan.next(index)
            if hit is None:
                return
            start, candidate, key = hit
            if len(candidate) >= m._min_candidate_length:
                known = verdicts.get(key)
                if known is not None and m._max_tries > known[0]:
                    used, rel, raw, number = known
                    m._max_tries -= used
                    match = None if raw is None else PhoneNumberMatch(start + rel, raw, number)
                elif (
                    m.leniency >= phonenumbers.Leniency.VALID
                    and (_hopeless(candidate) or region.hopeless(candidate))
                    and m._max_tries > (used := _tries_when_nothing_parses(candidate, key[3]))
                ):
                    m._max_tries -= used
                    match = None
                    if len(verdicts) >= _MEMO_LIMIT:
                        verdicts.clear()
                    verdicts[key] = (used, 0, None, None)  # as a cached failed parse
                else:
                    budget = m._max_tries
                    match = m._extract_match(candidate, start)
                    if m._max_tries > 0:  # a verdict reached within budget: reusable
                        if len(verdicts) >= _MEMO_LIMIT:
                            verdicts.clear()
                        verdicts[key] = (
                            (budget - m._max_tries, 0, None, None)
                            if match is None
                            else (budget - m._max_tries, match.start - start, match.raw_string,
                                  match.number)
                        )  # fmt: skip
                if match is not None:
                    yield match
                    index = match.end
                    continue
                m._max_tries -= 1
            index = start + len(candidate)


def share(recognizer: Any) -> SharedPhone | None:
    """Patch a Presidio phone recognizer; None for anything else (a subclass included)."""
    if type(recognizer) is not PhoneRecognizer:
        return None
    shared = SharedPhone(recognizer)
    recognizer.analyze = shared  # type: ignore[method-assign]
    return shared

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

from typing import Any

from phonenumbers.phonenumbermatcher import (
    _PATTERN,
    _TIME_STAMPS_SUFFIX,
    PhoneNumberMatch,
    PhoneNumberMatcher,
)
from phonenumbers.phonenumberutil import _SECOND_NUMBER_START_PATTERN
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
    def __init__(self, scan: _Scan, region: str, leniency: int, verdicts: dict[Key, Any]) -> None:
        super().__init__(scan.text, region, leniency=leniency)
        self._scan = scan
        self._verdicts = verdicts

    def _find(self, index: int) -> PhoneNumberMatch | None:
        # PhoneNumberMatcher._find, with the search served by the shared scan.
        while self._max_tries > 0:
            found = self._scan.next(index)
            if found is None:
                return None
            start, candidate, key = found
            if len(candidate) >= self._min_candidate_length:
                match = self._verdict(candidate, start, key)
                if match is not None:
                    return match
                self._max_tries -= 1
            index = start + len(candidate)
        return None

    def _verdict(self, candidate: str, offset: int, key: Key) -> PhoneNumberMatch | None:
        hit = self._verdicts.get(key)
        if hit is not None and self._max_tries > hit[0]:
            used, rel, raw, number = hit
            self._max_tries -= used
            return None if raw is None else PhoneNumberMatch(offset + rel, raw, number)
        budget = self._max_tries
        match = self._extract_match(candidate, offset)
        if self._max_tries > 0:
            if len(self._verdicts) >= _MEMO_LIMIT:
                self._verdicts.clear()
            used = budget - self._max_tries
            self._verdicts[key] = (
                (used, 0, None, None)
                if match is None
                else (used, match.start - offset, match.raw_string, match.number)
            )
        return match


class SharedPhone:
    """Replaces a `PhoneRecognizer`'s `analyze`: same matches, shared scan, remembered verdicts.

    Patched per instance, so the recognizer's id, context and thresholds stay its own.
    """

    def __init__(self, recognizer: PhoneRecognizer) -> None:
        self.recognizer = recognizer
        self.verdicts: dict[tuple[str, int], dict[Key, Any]] = {}

    def __call__(
        self, text: str, entities: list[str], nlp_artifacts: Any = None, **kwargs: Any
    ) -> list[RecognizerResult]:
        r = self.recognizer
        leniency = int(r.leniency or 0)
        results = []
        scan = _Scan(text)
        for region in r.supported_regions:
            verdicts = self.verdicts.setdefault((region, leniency), {})
            for match in _SharedMatcher(scan, region, leniency, verdicts):
                results.append(r._get_recognizer_result(match, text, region, nlp_artifacts))
        return EntityRecognizer.remove_duplicates(results)


def share(recognizer: Any) -> SharedPhone | None:
    """Patch a Presidio phone recognizer; None for anything else (a subclass included)."""
    if type(recognizer) is not PhoneRecognizer:
        return None
    shared = SharedPhone(recognizer)
    recognizer.analyze = shared  # type: ignore[method-assign]
    return shared

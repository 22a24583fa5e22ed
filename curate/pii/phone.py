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

Every memo's values depend only on its keys, whoever computed them, so the workers of a
run pool what they learn (`SharedPhone.journal` and `MODULE_JOURNAL`, passed between the
local engine's workers by `curate.engines.memo_exchange`).

The matcher's search order and its retry accounting are otherwise its own, so the
matches are the ones the plain matcher finds. The explanation text Presidio builds for
each match (a second parse to name the region) is skipped: results carry it only when
`return_decision_process` is asked for, and curate never asks.

phonenumbers' private matcher methods are used here; its version enters the stage's
fingerprint, and tests compare this recognizer with Presidio's on varied and fuzzed text.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterator
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
)
from presidio_analyzer import EntityRecognizer, RecognizerResult
from presidio_analyzer.predefined_recognizers import PhoneRecognizer

from curate.memo_journal import Journal
from curate.pii.phone_filter import Part, RegionFilter, digits, part, parts

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
    # (no character is both a digit and a letter)
    return sum(map(str.isdigit, candidate)) + sum(map(str.isalpha, candidate)) < _SHORTEST


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
        if any(map(str.isalpha, candidate)) or any(p in candidate for p in _PLUS_CHARS):
            return False
        if sum(map(str.isdigit, candidate)) >= self.shortest:
            return False
        return self.idd.search(digits(candidate)) is None


_REGIONS: dict[str, _Region] = {}
_FILTERS: dict[str, RegionFilter] = {}
_READINGS: dict[str, list[Part] | None] = {}


def _region(region: str) -> _Region:
    known = _REGIONS.get(region)
    if known is None:
        known = _REGIONS[region] = _Region(region)
    return known


def _filter(region: str) -> RegionFilter:
    known = _FILTERS.get(region)
    if known is None:
        known = _FILTERS[region] = RegionFilter(region)
    return known


def _readings(candidate: str) -> list[Part] | None:
    """The parts of a candidate as `phone_filter` reads them, remembered."""
    if candidate in _READINGS:
        return _READINGS[candidate]
    if len(_READINGS) >= _MEMO_LIMIT:
        _READINGS.clear()
    found = _READINGS[candidate] = parts(candidate)
    return found


def _fails(candidate: str, region: str) -> bool:
    """No part of the candidate can give a valid number in the region (leniency VALID):
    too few digits anywhere (`_hopeless`), for the region's calling code (`_Region`), or
    no reading its metadata allows (`phone_filter`)."""
    return _hopeless(candidate) or _fails_in(candidate, region)


def _fails_in(candidate: str, region: str) -> bool:
    return _region(region).hopeless(candidate) or _filter(region).cannot(_readings(candidate))


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


def _lead() -> int | None:
    """How far before its first digit a candidate may start: `_PATTERN` opens with at most
    two lead characters (brackets, plus signs), each followed by at most four punctuation
    characters. None (search from where asked) if the pattern is not of that form."""
    pattern = _PATTERN.pattern
    opening = pattern[: pattern.find("\\d")]
    return 2 * (1 + 4) if opening.startswith("(?:[") and opening.endswith("]{0,4}){0,2}") else None


_LEAD = _lead()
_DIGIT = re.compile(r"\d")  # the digits of `_PATTERN` (a str pattern: Unicode digits)
_NOWHERE: dict[tuple[str, tuple[str, ...]], bool] = {}


def _nowhere(candidate: str, regions: tuple[str, ...]) -> bool:
    """`_fails` in every region, remembered."""
    key = (candidate, regions)
    known = _NOWHERE.get(key)
    if known is None:
        if len(_NOWHERE) >= _MEMO_LIMIT:
            _NOWHERE.clear()
        known = _NOWHERE[key] = _hopeless(candidate) or all(
            _fails_in(candidate, r) for r in regions
        )
    return known


def _module_memo(name: Hashable) -> dict[Any, Any]:
    if name == ("nowhere",):
        return _NOWHERE
    raise ValueError(f"no memo named {name!r}")


MODULE_JOURNAL = Journal(_module_memo, lambda: [("nowhere",)], _MEMO_LIMIT)
"""The journal of the memos this module keeps for every recognizer of the process."""


class _Scan:
    """The candidates of one text by search position, shared by every region's matcher."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.found: dict[int, tuple[int, str, Key] | None] = {}

    def next(self, index: int) -> tuple[int, str, Key] | None:
        if index in self.found:
            return self.found[index]
        text = self.text
        at = index
        if _LEAD is not None:  # from just before the next digit: no match starts earlier
            digit = _DIGIT.search(text, index)
            if digit is None:
                self.found[index] = None
                return None
            at = max(index, digit.start() - _LEAD)
        hit = _PATTERN.search(text, at)
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
        self._valid_only = leniency >= phonenumbers.Leniency.VALID
        self._area = _region(region or "ZZ")
        self._filter = _filter(region or "ZZ")

    def _parse_and_verify(self, candidate: str, offset: int) -> PhoneNumberMatch | None:
        text = self.text
        prev_bad = offset > 0 and not _LEAD_PATTERN.match(candidate) and _bad(text[offset - 1])
        end = offset + len(candidate)
        key = (candidate, prev_bad, end < len(text) and _bad(text[end]))
        if key in self._parts:
            number = self._parts[key]
            return None if number is None else PhoneNumberMatch(offset, candidate, number)
        # A part that cannot be a valid number here (`_hopeless`, `_Region`, `phone_filter`)
        # is not parsed.
        if self._valid_only and (
            _hopeless(candidate)
            or self._area.hopeless(candidate)
            or self._filter.cannot(part(candidate))
        ):
            match = None
        else:
            match = super()._parse_and_verify(candidate, offset)
        if len(self._parts) >= _MEMO_LIMIT:
            self._parts.clear()
        self._parts[key] = None if match is None else match.number
        return match


class _Walk:
    """Regions searching from one position: a shared base budget and each one's offset."""

    __slots__ = ("base", "lowest", "members")

    def __init__(self, base: int) -> None:
        self.base = base
        self.lowest = 0
        self.members: list[tuple[_SharedMatcher, dict[Key, Any], int]] = []

    @staticmethod
    def join(
        waiting: dict[int, _Walk], index: int, m: _SharedMatcher, verdicts: dict[Key, Any],
        budget: int,
    ) -> None:  # fmt: skip
        walk = waiting.get(index)
        if walk is None:
            walk = waiting[index] = _Walk(budget)
        offset = budget - walk.base
        walk.members.append((m, verdicts, offset))
        walk.lowest = min(walk.lowest, offset)

    def moveto(self, waiting: dict[int, _Walk], index: int) -> None:
        there = waiting.get(index)
        if there is None:
            waiting[index] = self
            return
        for m, verdicts, offset in self.members:
            _Walk.join(waiting, index, m, verdicts, self.base + offset)

    def keep_alive(self) -> None:
        """Drop the regions whose budget is spent (their matchers stop there)."""
        self.members = [x for x in self.members if self.base + x[2] > 0]
        self.lowest = min((x[2] for x in self.members), default=0)


class SharedPhone:
    """Replaces a `PhoneRecognizer`'s `analyze`: same matches, shared scan, remembered verdicts.

    Patched per instance, so the recognizer's id, context and thresholds stay its own.

    The regions' matchers walk a text in lockstep (`lockstep`): until a region finds a
    number, every region meets the same candidates with the same retry budget, because
    what a candidate costs in retries when nothing in it parses does not depend on the
    region. So a candidate that no region can parse (`silent`: its retry cost, remembered
    per candidate) is one look-up for all regions instead of one per region. A region
    that finds a number goes on from the number's end, with its own budget, as its own
    matcher would, and walks with the others again where its search meets theirs.
    """

    def __init__(self, recognizer: PhoneRecognizer) -> None:
        self.recognizer = recognizer
        self.verdicts: dict[tuple[str, int], dict[Key, Any]] = {}
        self.parts: dict[tuple[str, int], dict[Any, Any]] = {}
        self.silent: dict[int, dict[Key, int]] = {}
        self.journal = Journal(self._memo, self._memo_names, _MEMO_LIMIT)

    def _memo(self, name: Hashable) -> dict[Any, Any]:
        """A memo by its journal name: ("verdicts" | "parts", region, leniency) or
        ("silent", leniency)."""
        assert isinstance(name, tuple)
        kind = name[0]
        if kind == "verdicts":
            return self.verdicts.setdefault((name[1], name[2]), {})
        if kind == "parts":
            return self.parts.setdefault((name[1], name[2]), {})
        if kind == "silent":
            return self.silent.setdefault(name[1], {})
        raise ValueError(f"no memo named {name!r}")

    def _memo_names(self) -> list[Hashable]:
        return [
            *(("verdicts", *k) for k in self.verdicts),
            *(("parts", *k) for k in self.parts),
            *(("silent", k) for k in self.silent),
        ]

    def __call__(
        self, text: str, entities: list[str], nlp_artifacts: Any = None, **kwargs: Any
    ) -> list[RecognizerResult]:
        r = self.recognizer
        leniency = int(r.leniency or 0)
        scan = _Scan(text)
        group = []
        for region in r.supported_regions:
            verdicts = self.verdicts.setdefault((region, leniency), {})
            parts = self.parts.setdefault((region, leniency), {})
            group.append((_SharedMatcher(text, region, leniency, parts), verdicts))
        results = [
            r._get_recognizer_result(match, text, region, nlp_artifacts)
            for region, match in self.lockstep(scan, group, self.silent.setdefault(leniency, {}))
        ]
        # remove_duplicates starts from a set and sorts: the order of results does not count
        return EntityRecognizer.remove_duplicates(results)

    @classmethod
    def lockstep(
        cls,
        scan: _Scan,
        group: list[tuple[_SharedMatcher, dict[Key, Any]]],
        silent: dict[Key, int],
    ) -> list[tuple[str | None, PhoneNumberMatch]]:
        """Every region's matches (region, match), as each region's own matcher finds them.

        Regions that search from the same position walk together (`_Walk`), each with its
        own budget; `silent[key]` is the retries a candidate costs in every region of
        `group` when none finds a number in it, reused while every walker's budget exceeds
        it. A region that finds a number goes on from the number's end, and walks with
        the others again once its search position meets theirs.
        """
        found: list[tuple[str | None, PhoneNumberMatch]] = []
        whole = len(group)
        shortest = group[0][0]._min_candidate_length
        if any(m._min_candidate_length != shortest for m, _ in group):
            for m, verdicts in group:  # matchers not alike: each on its own
                found += [(m.preferred_region, x) for x in cls.matches(scan, m, verdicts)]
            return found
        valid = all(m.leniency >= phonenumbers.Leniency.VALID for m, _ in group)
        regions = tuple(m.preferred_region or "ZZ" for m, _ in group)
        waiting: dict[int, _Walk] = {}
        for m, verdicts in group:
            _Walk.join(waiting, 0, m, verdicts, m._max_tries)
        known = scan.found
        while waiting:
            index = min(waiting)
            walk = waiting.pop(index)
            hit = known[index] if index in known else scan.next(index)
            if hit is None:
                continue
            start, candidate, key = hit
            end = start + len(candidate)
            if len(candidate) < shortest:
                walk.moveto(waiting, end)
                continue
            used = silent.get(key)
            if used is None and valid and _nowhere(candidate, regions):
                # no region can parse it: what it costs each of them, without parsing
                used = _tries_when_nothing_parses(candidate, key[3])
                if len(silent) >= _MEMO_LIMIT:
                    silent.clear()
                silent[key] = used
            if used is not None and walk.base + walk.lowest > used:
                walk.base -= used + 1
                if walk.base + walk.lowest > 0:
                    walk.moveto(waiting, end)
                else:
                    walk.keep_alive()
                    if walk.members:
                        walk.moveto(waiting, end)
                continue
            spent: set[int | None] = set()
            for m, verdicts, offset in walk.members:
                m._max_tries = before = walk.base + offset
                match = cls.step(m, start, candidate, key, verdicts)
                if match is not None:
                    found.append((m.preferred_region, match))
                    spent.add(None)
                    if m._max_tries > 0:
                        _Walk.join(waiting, match.end, m, verdicts, m._max_tries)
                    continue
                spent.add(before - m._max_tries if m._max_tries > 0 else None)
                if m._max_tries > 1:
                    _Walk.join(waiting, end, m, verdicts, m._max_tries - 1)
            cost = spent.pop() if len(spent) == 1 else None
            if len(walk.members) == whole and cost is not None:
                if len(silent) >= _MEMO_LIMIT:  # no region parses it, within budget
                    silent.clear()
                silent[key] = cost
        return found

    @staticmethod
    def step(
        m: _SharedMatcher, start: int, candidate: str, key: Key, verdicts: dict[Key, Any]
    ) -> PhoneNumberMatch | None:
        """One candidate, as `PhoneNumberMatcher._find` treats it (the retry spent on a
        candidate without a number is the caller's), its verdict remembered or reused."""
        known = verdicts.get(key)
        if known is not None and m._max_tries > known[0]:
            used, rel, raw, number = known
            m._max_tries -= used
            return None if raw is None else PhoneNumberMatch(start + rel, raw, number)
        if (
            m.leniency >= phonenumbers.Leniency.VALID
            and _fails(candidate, m.preferred_region or "ZZ")
            and m._max_tries > (used := _tries_when_nothing_parses(candidate, key[3]))
        ):
            m._max_tries -= used
            if len(verdicts) >= _MEMO_LIMIT:
                verdicts.clear()
            verdicts[key] = (used, 0, None, None)  # as a cached failed parse
            return None
        budget = m._max_tries
        match = m._extract_match(candidate, start)
        if m._max_tries > 0:  # a verdict reached within budget: reusable
            if len(verdicts) >= _MEMO_LIMIT:
                verdicts.clear()
            verdicts[key] = (
                (budget - m._max_tries, 0, None, None)
                if match is None
                else (budget - m._max_tries, match.start - start, match.raw_string, match.number)
            )
        return match

    @classmethod
    def matches(
        cls, scan: _Scan, m: _SharedMatcher, verdicts: dict[Key, Any], index: int = 0
    ) -> Iterator[PhoneNumberMatch]:
        """PhoneNumberMatcher's iteration (`has_next` and `_find`) from `index`, one loop,
        verdicts reused."""
        found = scan.found
        while m._max_tries > 0:
            hit = found[index] if index in found else scan.next(index)
            if hit is None:
                return
            start, candidate, key = hit
            if len(candidate) >= m._min_candidate_length:
                match = cls.step(m, start, candidate, key, verdicts)
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

"""Phone candidates that cannot be a valid number in a region, told from phonenumbers'
metadata without parsing them.

With leniency VALID, the matcher keeps a part of a candidate only if
`phonenumbers.parse(part, region)` gives a number that `is_valid_number` accepts and whose
national prefix is written when its format requires one. Parsing is most of plain
Presidio's time, and on real text nearly every part fails (years, dates, versions, ids).
For a part written without letters and without a plus sign, parse can only:

- strip the region's international (IDD) prefix from the start of the part's digits, then a
  country calling code; the national number left, after a national prefix transform rule
  (which adds at most the digits it spells), has at most the digits that follow the code;
  a valid number needs at least the shortest possible length of a region with that code
  (`_need`);
- or keep the region's calling code, with the national number made of the part's digits
  D: D itself, unless D starts with the calling code, with a national prefix or carrier
  code of the region (or of the code's main region), or carries an extension (`,` `;`
  `#` `~`), which make it a suffix (or a substring) of D, as long as no transform rule can
  add digits; and then `is_valid_number` needs it to fullmatch a number type's pattern
  (fixed line, mobile, ...) of some region with the calling code, at a length that type
  and the region allow; and when D is the national number as written, the number's format
  (`_choose_formatting_pattern_for_number`) must not require a national prefix that D
  lacks.

A part none of whose readings passes these necessary conditions is not parsed: it fails
for the region. The conditions read phonenumbers' private helpers and metadata, whose
version enters the stage's fingerprint; tests compare the verdicts with parsing on
varied and fuzzed text.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from phonenumbers import PhoneMetadata
from phonenumbers.phonenumbermatcher import _INNER_MATCHES
from phonenumbers.phonenumberutil import (
    _PLUS_CHARS,
    _UNWANTED_END_CHAR_PATTERN,
    COUNTRY_CODE_TO_REGION_CODE,
    _choose_formatting_pattern_for_number,
    _formatting_rule_has_first_group_only,
    normalize_digits_only,
)

_TYPES = ("premium_rate", "toll_free", "shared_cost", "voip", "personal_number", "pager",
          "uan", "voicemail", "fixed_line", "mobile")  # fmt: skip
# Patterns are tested on slices of the digits: only patterns that see nothing outside.
_ANCHORS = ("^", "$", "(?=", "(?!", "(?<", "\\b", "\\B", "\\A", "\\Z")
# Characters after which parse may cut an extension off the end of a number.
_EXTENSION = "#\uff03~\uff5e,;"  # with the fullwidth number sign and tilde
_NEED: dict[str, int] = {}
_MEMO_LIMIT = 1 << 18

Part = tuple[str, bool]  # a part's digits, and whether an extension may be cut off


def _metadata(region: str, code: int) -> Any:
    if region == "001":
        return PhoneMetadata.metadata_for_nongeo_region(code)
    return PhoneMetadata.metadata_for_region(region)


def _lengths(desc: Any) -> set[int]:
    return set(desc.possible_length or ()) if desc is not None else set()


def _need(code: str) -> int | None:
    """The fewest digits that must follow calling code `code` (a string, as written) for a
    valid number; None for no calling code."""
    if not _NEED:
        for cc, regions in COUNTRY_CODE_TO_REGION_CODE.items():
            mds = [_metadata(r, cc) for r in regions]
            lengths = [min((n for n in _lengths(m.general_desc) if n > 0), default=0)
                       if m is not None else 0 for m in mds]  # fmt: skip
            rule = mds[0].national_prefix_transform_rule if mds[0] is not None else None
            extra = sum(ch.isdigit() for ch in rule or "")  # group numbers counted too
            _NEED[str(cc)] = max(0, min(lengths, default=0) - extra)
    return _NEED.get(code)


_NOT_DIGIT = re.compile(r"[^0-9]+")


def digits(piece: str) -> str:
    """`normalize_digits_only`, quicker on ASCII text (where only 0-9 are digits)."""
    return _NOT_DIGIT.sub("", piece) if piece.isascii() else normalize_digits_only(piece)


def parts(candidate: str) -> list[Part] | None:
    """The parts the matcher may parse (the candidate, then its inner groups, as
    `_extract_match` and `_extract_inner_match` cut them, whatever the retry budget), as
    digits; None when a letter or a plus sign leaves parse more readings than these."""
    if any(map(str.isalpha, candidate)) or any(p in candidate for p in _PLUS_CHARS):
        return None
    out = [_part(candidate)]
    for inner in _INNER_MATCHES:
        group = inner.search(candidate)
        if group is not None:
            out.append(_part(_trim(candidate[: group.start()])))
        while group is not None:
            out.append(_part(_trim(group.group(1))))
            group = inner.search(candidate, group.start() + 1)
    return out


def part(piece: str) -> list[Part] | None:
    """One part as `_parse_and_verify` gets it (no inner groups)."""
    if any(map(str.isalpha, piece)) or any(p in piece for p in _PLUS_CHARS):
        return None
    return [_part(piece)]


def _part(piece: str) -> Part:
    return digits(piece), any(c in piece for c in _EXTENSION)


def _trim(piece: str) -> str:
    trailing = _UNWANTED_END_CHAR_PATTERN.search(piece)
    return piece[: trailing.start()] if trailing else piece


class RegionFilter:
    """The necessary conditions above for one region; `usable` is False when its metadata
    falls outside what they were derived for (then every part may match)."""

    def __init__(self, region: str) -> None:
        self.usable = False
        self.known: dict[Part, bool] = {}
        md = PhoneMetadata.metadata_for_region(region)
        if md is None or md.country_code is None:
            return
        regions = COUNTRY_CODE_TO_REGION_CODE.get(md.country_code, ())
        main = PhoneMetadata.metadata_for_region(regions[0]) if regions else None
        if main is None:
            return
        by_length: dict[int, list[str]] = defaultdict(list)
        for other in regions:
            om = PhoneMetadata.metadata_for_region(other)
            general = _lengths(om.general_desc) if om is not None else set()
            if om is None or not general or min(general) < 1:
                return
            for name in _TYPES:
                desc = getattr(om, name)
                pattern = desc.national_number_pattern if desc is not None else None
                if not pattern:
                    continue
                if any(a in pattern for a in _ANCHORS):
                    return
                lengths = _lengths(desc) & general if desc.possible_length else general
                for n in lengths:
                    by_length[n].append(pattern)
        self.types = {
            n: re.compile("|".join(f"(?:{p})" for p in ps)) for n, ps in by_length.items()
        }
        self.code = str(md.country_code)
        self.main = main
        self.prefixes = [re.compile(p) for p in {md.national_prefix_for_parsing,
                         main.national_prefix_for_parsing} if p]  # fmt: skip
        # a transform rule may add digits or join groups: then no suffix reasoning
        self.transforms = bool(
            md.national_prefix_transform_rule or main.national_prefix_transform_rule
        )
        self.idd = re.compile(md.international_prefix) if md.international_prefix else None
        self.usable = True

    def cannot(self, readings: list[Part] | None) -> bool:
        """True when no part can give a valid number in this region (see the module)."""
        if not self.usable or readings is None:
            return False
        return not any(self._may(digits, ext) for digits, ext in readings)

    def _may(self, d: str, ext: bool) -> bool:
        """Some reading of these digits may be valid (remembered: digits recur in candidates
        that differ in their punctuation)."""
        known = self.known.get((d, ext))
        if known is None:
            if len(self.known) >= _MEMO_LIMIT:
                self.known.clear()
            known = self.known[(d, ext)] = self._reading(d, ext)
        return known

    def _reading(self, d: str, ext: bool) -> bool:
        n = len(d)
        if self.idd is not None and self.idd.match(d):  # IDD prefix, calling code, enough after
            for w in range(n + 1):  # wherever the prefix may end
                if not self.idd.fullmatch(d, 0, w):
                    continue
                for k in (1, 2, 3):
                    need = _need(d[w : w + k]) if w + k <= n else None
                    if need is not None and n - w - k >= need:
                        return True
        if ext or d.startswith(self.code) or any(p.match(d) for p in self.prefixes):
            if self.transforms:
                return True
            for length, rx in self.types.items():  # a suffix (or, with an extension, any slice)
                for i in range(n - length + 1) if ext else (n - length,):
                    if i >= 0 and rx.fullmatch(d, i, i + length):
                        return True
            return False
        # The national number is d as written (no prefix to strip).
        whole = self.types.get(n)
        if whole is None or not whole.fullmatch(d):
            return False
        rule = _choose_formatting_pattern_for_number(self.main.number_format, d)
        return not (
            rule is not None
            and rule.national_prefix_formatting_rule
            and not rule.national_prefix_optional_when_formatting
            and not _formatting_rule_has_first_group_only(rule.national_prefix_formatting_rule)
        )

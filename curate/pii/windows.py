"""Pattern recognizers that read only the parts of a text that can hold a match.

A Presidio pattern recognizer runs each of its regular expressions over the whole text.
For the recognizers below every match is known to contain a *trigger* (the `@` of an
e-mail address, a colon or digit-dot-digit of an IP address, three digits of an SSN)
and to stay near it, so the recognizer's own `analyze` runs on slices around triggers
and its results are shifted back:

- a *run* slice is the maximal run of characters that a match can consist of (`run`)
  around a trigger: no match extends beyond it;
- a *reach* slice extends `reach` characters (the longest possible match) on both sides
  of a trigger, then outwards to the ends of the words it cuts.

Either way the characters just outside a slice are not word characters (nor `:` or `.`,
for runs), and these expressions look at their surroundings only through `\\b`,
look-arounds on word characters and (IPv6) `:` and `.`: at a slice's edge they see what
they see in the whole text. Slices that overlap merge. So every match of the whole text
is a match in its slice and the other way round, and the scan inside a slice meets the
same matches in the same order: the results are the recognizer's own. The slices go to
the recognizer in one call, joined by NUL (see `Windowed.__call__`). Triggers are found
with the recognizer's regex engine and flags, so case folding and Unicode classes agree.
They are found without overlaps: an occurrence that is skipped overlaps one that is found,
so it lies in the same run, or (fixed-length triggers) at most the trigger's length - 1
away, which `reach` includes.

A spec is tied to the exact expressions it was derived for: if a Presidio release
changes a recognizer's patterns, that recognizer reads the whole text, as before.
Recognizers are patched per instance (`analyze` is replaced), so their id, context and
score thresholds, which the analyzer looks up, stay theirs.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from typing import Any

import regex
from presidio_analyzer import PatternRecognizer, RecognizerResult

_EMAIL = (
    r"\b((([!#$%&'*+\-/=?^_`{|}~\w])|([!#$%&'*+\-/=?^_`{|}~\w][!#$%&'*+\-/=?^_`{|}~\.\w]{0,}"
    r"[!#$%&'*+\-/=?^_`{|}~\w]))[@]\w+(?:-+\w+)*(?:\.\w+(?:-+\w+)*)+)\b"
)
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)"
_H = r"[0-9A-Fa-f]{1,4}"
_IP = (
    r"(?<![\w:])::(?:ffff(?::0{1,4})?:)?(?:"
    + _OCTET
    + r"\.){3}"
    + _OCTET
    + r"(?:/(?:12[0-8]|1[01]\d|[1-9]?\d))?\b",
    r"(?<![\w:])(?:(?:"
    + _H
    + r":){1,5}:(?:"
    + _H
    + r":){0,4}|(?:"
    + _H
    + r":){6})(?:"
    + _OCTET
    + r"\.){3}"
    + _OCTET
    + r"(?:/(?:12[0-8]|1[01]\d|[1-9]?\d))?\b",
    r"\b" + r"\.".join([_OCTET] * 4) + r"(?:/(?:[0-2]?\d|3[0-2]))?\b",
    r"(?<![\w:])(?:(?:"
    + _H
    + r":){7}"
    + _H
    + r"|(?:"
    + _H
    + r":){1,7}:|:(?::"
    + _H
    + r"){1,7}|(?:"
    + _H
    + r":){1,6}:"
    + _H
    + r"|(?:"
    + _H
    + r":){1,5}(?::"
    + _H
    + r"){1,2}|(?:"
    + _H
    + r":){1,4}(?::"
    + _H
    + r"){1,3}|(?:"
    + _H
    + r":){1,3}(?::"
    + _H
    + r"){1,4}|(?:"
    + _H
    + r":){1,2}(?::"
    + _H
    + r"){1,5}|"
    + _H
    + r":(?::"
    + _H
    + r"){1,6}|:(?::"
    + _H
    + r"){1,6})(?:%[0-9a-zA-Z]+)?(?:/(?:12[0-8]|1[01]\d|[1-9]?\d))?"
    r"(?![\w:]|\.\d)",
    r"(?<![\w:])::(?:/(?:12[0-8]|1[01]\d|[1-9]?\d))?(?![\w:])",
)
_SSN = (
    r"\b([0-9]{5})-([0-9]{4})\b",
    r"\b([0-9]{3})-([0-9]{6})\b",
    r"\b(([0-9]{3})-([0-9]{2})-([0-9]{4}))\b",
    r"\b[0-9]{9}\b",
    r"\b([0-9]{3})[- .]([0-9]{2})[- .]([0-9]{4})\b",
)
_IBAN = (
    r"(?<![A-Z0-9])([A-Z]{2}[0-9]{2}(?:[ -]?[A-Z0-9]{4}){2,6})((?:[ -]?[A-Z0-9]{4})?)"
    r"((?:[ -]?[A-Z0-9]{1,3})?)(?![A-Z0-9])",
)


_CARD = (
    r"\b(?!1\d{12}(?!\d))((4\d{3})|(5[0-5]\d{2})|(6\d{3})|(1\d{3})|(3\d{3}))[- ]?(\d{3,4})"
    r"[- ]?(\d{3,4})[- ]?(\d{3,5})\b",
)
_CRYPTO = (r"(bc1|[13])[a-zA-HJ-NP-Z0-9]{25,59}",)


@dataclass(frozen=True)
class WindowSpec:
    """Where a recognizer's matches can be: see the module docstring."""

    patterns: tuple[str, ...]  # the exact expressions this spec was derived for
    trigger: str  # every match contains a match of this expression
    run: str | None = None  # a match consists only of these characters ...
    reach: int | None = None  # ... or is at most this long, plus the trigger's length - 1
    # The trigger found with Python's `re` (3x quicker here than `regex`): only for ASCII
    # classes both engines match alike under the recognizer's flags (tested per code point).
    stdlib_trigger: bool = False


SPECS: dict[str, WindowSpec] = {
    # local part, @ and domain are all in the run.
    "EmailRecognizer": WindowSpec((_EMAIL,), trigger="@", run=r"[!#$%&'*+\-/=?^_`{|}~.\w@]"),
    # IPv4 (also inside the IPv4-mapped forms) needs digit.digit; an IPv6 form without
    # "::" has eight groups, so a hex digit, a colon and a hex digit; zone ids and
    # prefixes are \w, % and /. ("e:" alone, as in "Note:", is no trigger.)
    "IpRecognizer": WindowSpec(
        _IP, trigger=r"[0-9]\.[0-9]|[0-9a-f]:[0-9a-f]|::", run=r"[\w.:/%]", stdlib_trigger=True
    ),
    # at most 11 characters, three ASCII digits in a row in every form.
    "UsSsnRecognizer": WindowSpec(_SSN, trigger="[0-9]{3}", reach=11 + 2),
    # 2 letters, 2 digits, then 2 to 6 (+ 1) groups of 4 and one of 3, each after an optional
    # separator: every match opens with the trigger (12 to 14 characters; letters and digits
    # alone, as in "utf8", "sha256", are not one), at most 43 long.
    "IbanRecognizer": WindowSpec(
        _IBAN, trigger="[A-Z]{2}[0-9]{2}(?:[ -]?[A-Z0-9]{4}){2}", reach=43 + 13
    ),
    # Gates only, not windowed (windows measured slower: their triggers are everywhere).
    "CreditCardRecognizer": WindowSpec(_CARD, trigger=r"\d{3}"),
    # "bc1" or 1 or 3, then at least 25 of the class: a 1 or 3 followed by 25 of them.
    "CryptoRecognizer": WindowSpec(_CRYPTO, trigger="[13][a-zA-HJ-NP-Z0-9]{25}"),
}


def spec_for(recognizer: Any) -> WindowSpec | None:
    """The spec for a Presidio recognizer, if its patterns are the ones it was made for."""
    spec = SPECS.get(type(recognizer).__name__)
    if spec is None or not isinstance(recognizer, PatternRecognizer):
        return None
    if getattr(recognizer, "deny_list", None):
        return None
    patterns: list[Any] = getattr(recognizer, "patterns", [])
    if tuple(p.regex for p in patterns) != spec.patterns:
        return None
    return spec


class Windowed:
    """Replaces a recognizer's `analyze`: its own analysis, run on slices (see above)."""

    def __init__(self, recognizer: PatternRecognizer, spec: WindowSpec) -> None:
        self.original = recognizer.analyze
        self.spec = spec
        flags = recognizer.global_regex_flags or 0
        self.trigger: Any = regex.compile(spec.trigger, flags)
        if spec.stdlib_trigger and not flags & ~_STDLIB_FLAGS:
            self.trigger = re.compile(spec.trigger, flags)
        cls = spec.run or r"\w"
        self.ahead = regex.compile(cls + "*", flags)
        self.back = regex.compile(cls + "*", flags | regex.REVERSE)

    def has_trigger(self, text: str) -> bool:
        return self.trigger.search(text) is not None

    def slices(self, text: str) -> list[tuple[int, int]]:
        """Merged [start, end) slices, in text order."""
        n = len(text)
        raw: list[tuple[int, int]] = []  # trigger intervals, merged where they overlap
        covered = -1
        reach = self.spec.reach
        for t in self.trigger.finditer(text):
            if reach is None:
                if t.start() < covered:
                    continue
                a, b = t.start(), t.end()
                # the run around the trigger: computed once per run
                back = self.back.match(text, 0, a)
                ahead = self.ahead.match(text, b)
                a = back.start() if back else a
                covered = b = ahead.end() if ahead else b
                raw.append((a, b))
                continue
            a, b = max(0, t.start() - reach), min(n, t.end() + reach)
            if raw and a <= raw[-1][1]:
                raw[-1] = (raw[-1][0], max(raw[-1][1], b))
            else:
                raw.append((a, b))
        spans = raw
        if reach is not None:  # out to the ends of the words cut, once per merged interval
            spans = []
            for a, b in raw:
                back = self.back.match(text, 0, a)
                ahead = self.ahead.match(text, b)
                spans.append((back.start() if back else a, ahead.end() if ahead else b))
        out: list[tuple[int, int]] = []
        for a, b in spans:
            if out and a <= out[-1][1]:
                out[-1] = (out[-1][0], max(out[-1][1], b))
            else:
                out.append((a, b))
        return out

    def __call__(
        self, text: str, entities: list[str], nlp_artifacts: Any = None, **kwargs: Any
    ) -> list[RecognizerResult]:
        slices = self.slices(text)
        if not slices:
            return []
        # One call on the slices joined by NUL: a character no expression can match, not a
        # word character, colon or dot, so at each joint every expression sees what it sees
        # at a slice's edge, and no match spans a joint. Saves Presidio's per-call overhead.
        starts, parts, pos = [], [], 0
        for a, b in slices:
            starts.append(pos)
            parts.append(text[a:b])
            pos += b - a + 1
        found: list[RecognizerResult] = self.original(
            _JOINT.join(parts), entities, nlp_artifacts, **kwargs
        )
        for result in found:
            i = bisect_right(starts, result.start) - 1
            shift = slices[i][0] - starts[i]
            result.start += shift
            result.end += shift
        return found


_JOINT = "\x00"
_STDLIB_FLAGS = re.IGNORECASE | re.MULTILINE | re.DOTALL  # same values in `regex`


def window(recognizer: Any) -> Windowed | None:
    """Patch a recognizer to read only slices; None when no spec fits it.

    The returned object's `has_trigger` is the recognizer's document gate either way.
    """
    spec = spec_for(recognizer)
    if spec is None:
        return None
    windowed = Windowed(recognizer, spec)
    if spec.run is None and spec.reach is None:
        return windowed  # a gate only: the recognizer reads whole texts
    recognizer.analyze = windowed
    return windowed

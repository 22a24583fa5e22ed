"""FineWeb's word rules on a URL, as datatrove's URLFilter applies them.

The URL is cut into words at every run of characters other than ASCII letters and digits.
A document is removed when one of its URL's words is a banned word, when at least
`soft_word_threshold` distinct soft-banned words are among them, or when a banned subword
occurs anywhere in the URL with everything but letters and digits removed
(`my-bad-site` holds the subword `badsi`).
List entries are normalized the same way (letters and digits only, lowercase), blank lines
and lines starting with `#` skipped.

One difference from datatrove: the URL is lowercased before it is cut, so `PORN` counts as
`porn`. datatrove cuts the URL as it is, while its lists are lowercase, so a banned word in
capitals passes there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curate.errors import CurateError, shown

_NOT_WORD = re.compile(r"[^a-z0-9]+")

BANNED = "url_banned_word"
SOFT = "url_soft_banned_words"
SUBWORD = "url_banned_subword"
RULES = (BANNED, SOFT, SUBWORD)


def normalized(text: str) -> str:
    return _NOT_WORD.sub("", text.lower())


def read_words(path: Path) -> frozenset[str]:
    try:
        lines = path.read_bytes().decode("utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise CurateError(f"url_filter: cannot read {shown(path)}: {exc.strerror}") from None
    words = (normalized(line) for line in lines if not line.startswith("#"))
    return frozenset(w for w in words if w)


def substring_automaton(words: frozenset[str] | set[str]) -> Any:
    """An Aho-Corasick automaton over `words` (each stored as itself), or None for none."""
    if not words:
        return None
    import ahocorasick

    automaton = ahocorasick.Automaton()
    for word in sorted(words):
        automaton.add_word(word, word)
    automaton.make_automaton()
    return automaton


@dataclass
class WordRules:
    banned: frozenset[str]
    soft: frozenset[str]
    subwords: Any  # an automaton, or None
    threshold: int

    def hits(self, url: str) -> list[str]:
        """The word rules the (lowercased) URL fails, in order."""
        out = []
        words = set(_NOT_WORD.split(url))
        if self.banned and not self.banned.isdisjoint(words):
            out.append(BANNED)
        if self.soft and len(self.soft & words) >= self.threshold:
            out.append(SOFT)
        if self.subwords is not None and next(self.subwords.iter(_NOT_WORD.sub("", url)), None):
            out.append(SUBWORD)
        return out

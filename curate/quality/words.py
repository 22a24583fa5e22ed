"""Splitting English text into words the way spaCy's English tokenizer does, nearly.

datatrove splits English with a blank spaCy pipeline: punctuation becomes words of its
own ("end." -> "end", "."), hyphens between letters split ("well-known" -> "well",
"-", "known"), contractions split ("it's" -> "it", "'s"), while numbers, dotted names
and abbreviations stay whole ("3.14", "os.path", "e.g.", "U.S."). Every Gopher and
FineWeb statistic counts these words, punctuation included, so curate reproduces that
split with one regular expression that polars runs over a whole batch at once (Rust's
regex engine: no look-around, so each rule is written as what a word may contain).

Known differences (tabulated in docs/quality-filters.md): spaCy keeps a few odd forms
whole ("x==y", "foo_bar(x", "--option", "-x"), splits units off numbers ("5km") and
keeps a long list of abbreviations ("Mr.", "Inc.") whole; here those split the plain
way, except the common titles below.
"""

from __future__ import annotations

_W = r"[\p{L}\p{N}\p{M}]"
_ABBREVIATIONS = "Mr|Mrs|Ms|Dr|Jr|Sr|St|vs|Inc|Ltd|Co|Corp|Prof|Mt|Jan|Feb|Aug|Sept|Oct|Nov|Dec"

WORD = "|".join(
    [
        # URLs and e-mail addresses, whole
        r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s<>\"'()\[\]{}]*[^\s<>\"'()\[\]{}.,;:!?]",
        r"[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+",
        # e.g. i.e. U.S.A. a.m., then common abbreviations and single initials ("J.")
        r"(?:\p{L}\.){2,}",
        rf"\b(?:{_ABBREVIATIONS})\.",
        r"\b\p{L}\.\B",
        # a word: letters, digits and marks, joined by inner underscores or dots
        # (os.path, 3.14, x86_64), or by - : / = < > , before a digit (utf-8, 12:30, 1,000)
        rf"{_W}+(?:_+{_W}+|\.{_W}+|[\-:/=<>,]\p{{N}}{_W}*)*",
        # contractions split off their word: it|'s, don|'t, we|'re
        r"['\u2019](?:[sSdDmMtT]|re|RE|ve|VE|ll|LL)\b",
        # runs of dots or dashes, then any other character on its own
        r"\.{2,}|-{2,}|[^\s\p{L}\p{N}\p{M}]",
    ]
)
"""The word pattern, for `polars.Series.str.extract_all`."""

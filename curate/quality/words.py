"""Splitting English text into words the way spaCy's English tokenizer does, nearly.

datatrove splits English with a blank spaCy pipeline: punctuation becomes words of its
own ("end." -> "end", "."), hyphens between letters split ("well-known" -> "well",
"-", "known"), contractions split ("it's" -> "it", "'s"), while numbers, dotted names
and abbreviations stay whole ("3.14", "os.path", "e.g.", "U.S."). Every Gopher and
FineWeb statistic counts these words, punctuation included, so curate reproduces that
split with one regular expression that polars runs over a whole batch at once (Rust's
regex engine: no look-around, so each rule is written as what a word may contain).

Punctuation inside a chunk of non-space characters stays on the word unless spaCy has
an infix rule for it ("foo(bar" and "x==y" are one word each), and a dash or slash
starting a chunk is no prefix ("-m", "--zone", "/usr" are words). Known differences
(tabulated in docs/quality-filters.md): spaCy keeps dashes and slashes ending a chunk
("foo-"), splits units off numbers ("5km") and keeps a long list of abbreviations
("Mr.", "Inc.") whole; here those split the plain way, except the common titles below.
"""

from __future__ import annotations

_W = r"[\p{L}\p{N}\p{M}]"
_G = r"_()\[\]{}\"*#&;!?@$%^|~+`\\."
# What may join two runs of letters and digits inside one word: punctuation spaCy has no
# infix rule for (os.path, x86_64, foo(bar, D(Generic[S, unit@.service), after which even
# - : / = < > , join (roff's product\-search), or one of those not followed by a letter
# (utf-8, 12:30, 1,000, seed=/var)
_JOIN = rf"(?:[{_G}][{_G}\-:/=<>,]*{_W}+|[\-:/=<>,]+(?:\p{{N}}{_W}*|[{_G}/\\]+{_W}+))"
_ABBREVIATIONS = "Mr|Mrs|Ms|Dr|Jr|Sr|St|vs|Inc|Ltd|Co|Corp|Prof|Mt|Jan|Feb|Aug|Sept|Oct|Nov|Dec"

WORD = "|".join(
    [
        # URLs and e-mail addresses, whole
        r"[A-Za-z][A-Za-z0-9+.\-]*://(?:[^\s<>\"'()\[\]{}]*[^\s<>\"'()\[\]{}.,;:!?])?",
        r"[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+",
        # e.g. i.e. U.S.A. a.m., then common abbreviations and single initials ("J.")
        r"(?:\p{L}\.){2,}",
        rf"\b(?:{_ABBREVIATIONS})\.",
        r"\b\p{L}\.\B",
        # a dash, slash, dot or backslash starting a chunk is no prefix: it stays on its
        # word (-m, --zone, /usr, .TH, \fB); the match takes the space before it, which the
        # caller strips (an ellipsis starting a chunk is one, on its own)
        r"(?:^|\s)\.{2,}",
        rf"(?:^|\s)[\-/.\\][{_G}\-/]*(?:{_W}+{_JOIN}*)?",
        # a word: letters, digits and marks, joined as _JOIN says
        # "=", "-" or "/" ending a chunk stays too (LoadCredential=); the space is stripped
        rf"{_W}+{_JOIN}*(?:[=\-/]+(?:\s|$))?",
        # contractions split off their word: it|'s, don|'t, we|'re
        r"['\u2019](?:[sSdDmMtT]|re|RE|ve|VE|ll|LL)\b",
        # runs of dots or dashes, then any other character on its own
        r"\.{2,}|-{2,}|[^\s\p{L}\p{N}\p{M}]",
    ]
)
"""The word pattern, for `polars.Series.str.extract_all`; strip the words it returns."""

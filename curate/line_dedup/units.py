"""A document's units (lines or paragraphs), the hashes of the ones that count, and the
document rebuilt without some of them.

A text is units separated by separators: for `line`, every "\n"; for `paragraph`, a
newline followed by one or more blank lines (whitespace only). A unit counts when it is
not blank after `str.strip()` and its stripped text has at least `min_chars` characters;
it is compared by the xxh3-64 hash of that stripped text's UTF-8 bytes, so indentation
and a trailing "\r" do not make two navigation bars different. Units that do not count
are never removed. The same function cuts the text in the summary and in `apply`, so a
unit's position among the counted ones (`k`) names the same unit in both.

Removing units keeps everything else byte for byte: between two kept units stands the
separator that followed the first of them, so "a\nNAV\nb" becomes "a\nb" and a document
ending in a removed unit loses the separator before it ("a\nNAV" becomes "a").
"""

from __future__ import annotations

import re
from collections.abc import Collection

import xxhash

PARAGRAPH = re.compile(r"(\n(?:[^\S\n]*\n)+)")
UNITS = ("line", "paragraph")


def pieces(text: str, unit: str) -> tuple[list[str], list[str]]:
    """The text's units and the separators between them (one fewer)."""
    if unit == "line":
        parts = text.split("\n")
        return parts, ["\n"] * (len(parts) - 1)
    parts = PARAGRAPH.split(text)
    return parts[0::2], parts[1::2]


def unit_hashes(text: str, unit: str, min_chars: int) -> tuple[list[int], int]:
    """The hashes of the counted units in order, and the number of non-blank units."""
    hashes = []
    nonblank = 0
    digest = xxhash.xxh3_64_intdigest
    for part in pieces(text, unit)[0]:
        stripped = part.strip()
        if not stripped:
            continue
        nonblank += 1
        if len(stripped) >= min_chars:
            hashes.append(digest(stripped.encode("utf-8", "surrogatepass")))
    return hashes, nonblank


def counted(text: str, unit: str) -> int:
    """The non-blank units of a text (what a document dropped whole loses)."""
    return sum(1 for part in pieces(text, unit)[0] if part.strip())


def without(text: str, unit: str, min_chars: int, remove: Collection[int]) -> tuple[str, int]:
    """The text without its counted units at positions `remove`, and how many went."""
    units, seps = pieces(text, unit)
    out: list[str] = []
    k = 0
    gone = 0
    last = -1  # the index of the last unit kept
    for i, part in enumerate(units):
        stripped = part.strip()
        if stripped and len(stripped) >= min_chars:
            k += 1
            if k - 1 in remove:
                gone += 1
                continue
        if last >= 0:
            out.append(seps[last])
        out.append(part)
        last = i
    return "".join(out), gone

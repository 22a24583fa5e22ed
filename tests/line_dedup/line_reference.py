"""line_dedup written the plain way, for the tests to compare against: units compared by
their stripped text (no hash), counted with Python sets, removed by rebuilding the text."""

from __future__ import annotations

import itertools
import re
from typing import Any


def split(text: str, unit: str) -> tuple[list[str], list[str]]:
    if unit == "line":
        units = text.split("\n")
        return units, ["\n"] * (len(units) - 1)
    units, seps = [], []
    at = 0
    for m in re.finditer(r"\n(?:[^\S\n]*\n)+", text):
        units.append(text[at : m.start()])
        seps.append(m.group())
        at = m.end()
    units.append(text[at:])
    return units, seps


def line_dedup(
    docs: list[dict[str, Any]], unit: str = "line", max_documents: int = 1,
    keep_first: bool = True, min_chars: int = 1,
) -> tuple[list[dict[str, Any]], list[str]]:  # fmt: skip
    """The kept documents (text changed) and the ids dropped, in input order."""
    holders: dict[str, set[int]] = {}
    for i, doc in enumerate(docs):
        for u in split(doc["text"], unit)[0]:
            s = u.strip()
            if s and len(s) >= min_chars:
                holders.setdefault(s, set()).add(i)
    kept_once: set[str] = set()
    out, dropped = [], []
    for doc in docs:
        units, seps = split(doc["text"], unit)
        keep = []
        for j, u in enumerate(units):
            s = u.strip()
            go = bool(s) and len(s) >= min_chars and len(holders[s]) > max_documents
            if go and keep_first and s not in kept_once:
                kept_once.add(s)
                go = False
            if not go:
                keep.append(j)
        if any(u.strip() for u in units) and not any(units[j].strip() for j in keep):
            dropped.append(doc["id"])
            continue
        text = units[keep[0]]
        for a, b in itertools.pairwise(keep):
            text += seps[a] + units[b]
        out.append({**doc, "text": text})
    return out, dropped

"""`curate show VERSION --examples STAGE[:REASON]`: a version's examples as text.

STAGE is a stage's name or position; REASON, when given, is a reason or the start of one
up to a `:` (`quality_filter:gopher_quality` takes every gopher_quality rule). What is
printed comes from the version's examples files alone, already through PII.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from curate.errors import CurateError


def select(table: pa.Table, selector: str) -> list[dict[str, Any]]:
    """The examples `selector` names, in file order; an error names what there is."""
    stage, _, reason = selector.partition(":")
    rows = table.to_pylist()
    if not rows:
        raise CurateError(
            "this version keeps no examples: its recipe said output.examples: false, or has "
            "no pii stage (output.examples: {without_pii: true} keeps them anyway), no stage "
            "removed anything, or an older curate made it"
        )
    chosen = [
        r
        for r in rows
        if stage in (r["stage"], str(r["position"]))
        and (not reason or r["reason"] == reason or r["reason"].startswith(reason + ":"))
    ]
    if not chosen:
        have = sorted({(r["position"], r["stage"], r["reason"]) for r in rows})
        listing = ", ".join(f"{p} {s}:{why}" for p, s, why in have) or "none"
        raise CurateError(f"no examples for {selector!r}; the version has: {listing}")
    return chosen


def render(rows: list[dict[str, Any]]) -> str:
    out: list[str] = []
    group = None
    for r in rows:
        if (r["position"], r["reason"]) != group:
            group = (r["position"], r["reason"])
            n = sum(1 for x in rows if (x["position"], x["reason"]) == group)
            out.append(f"== {r['position']} {r['stage']}: {r['reason']} ({n} examples)")
        out.append(f"-- {r['id']} ({r['characters']:,} characters){_kept(r)}")
        out.append(_indented(r["text"]))
        if r["kept_id"] is not None:
            out.append(f"   kept instead: {r['kept_id']}")
            out.append(_indented(r["kept_text"]))
    return "\n".join(out)


def _kept(r: dict[str, Any]) -> str:
    if r["kept_id"] is None:
        return ""
    similarity = f", similarity {r['similarity']:.2f}" if r["similarity"] is not None else ""
    return f", a duplicate of {r['kept_id']}{similarity}"


def _indented(text: str | None) -> str:
    if text is None:
        return "    (text not found)"
    return "\n".join("    " + line for line in text.splitlines() or [""])

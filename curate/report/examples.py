"""The report's examples: per stage and reason, the documents kept as examples, each group
in a collapsible section (`<details>`), so the page opens short.

They come from the version's examples files (`curate.examples.files`), whose texts and
ids went through the recipe's pii stages before they were stored; the page escapes them
like every other value.
"""

from __future__ import annotations

from itertools import groupby
from typing import Any

from curate.report.markup import esc

NOTE = (
    '<p class="note">documents chosen by the smallest hash of their id, per stage and reason; '
    "texts (at most 1,000 characters) and ids with every value the recipe's pii stage finds "
    "replaced by its type</p>"
)


def render(rows: list[dict[str, Any]], labels: dict[int, str]) -> str:
    parts = [NOTE]
    for (position, reason), group in groupby(rows, key=lambda r: (r["position"], r["reason"])):
        items = list(group)
        label = labels.get(position, f"{position} {items[0]['stage']}")
        summary = f"{label}: {reason} ({len(items)})"
        body = "".join(_example(r) for r in items)
        parts.append(
            f'<details class="examples" data-stage="{esc(position)}" data-reason="{esc(reason)}">'
            f"<summary>{esc(summary)}</summary>{body}</details>"
        )
    return "".join(parts)


def _example(r: dict[str, Any]) -> str:
    head = f"{r['id']}, {r['characters']:,} characters"
    out = f'<div class="example"><p class="note">{esc(head)}</p><pre>{esc(r["text"])}</pre>'
    if r["kept_id"] is not None:
        similarity = f", similarity {r['similarity']:.2f}" if r["similarity"] is not None else ""
        kept = f"kept instead: {r['kept_id']}{similarity}"
        out += f'<p class="note">{esc(kept)}</p><pre>{esc(r["kept_text"])}</pre>'
    return out + "</div>"

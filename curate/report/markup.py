"""HTML pieces of the report: every value passes through `esc` on its way in.

The page is plain HTML and inline SVG with one inline stylesheet scoped to the report's
root element (so a notebook displaying it keeps its own look): no script, no external
resource, and a Content-Security-Policy that forbids fetching anything, so a page that
opened without the network still could not reach it.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any

CSP = "default-src 'none'; style-src 'unsafe-inline'"
CSS = """
.curate-report{font:14px/1.45 system-ui,sans-serif;color:#222;max-width:980px;
  margin:1em auto;padding:0 1em}
.curate-report h1{font-size:1.5em;margin:.2em 0}
.curate-report h2{font-size:1.15em;margin:1.4em 0 .4em;border-bottom:1px solid #ddd}
.curate-report table{border-collapse:collapse;margin:.4em 0;font-size:13px}
.curate-report th,.curate-report td{padding:2px 8px;border-bottom:1px solid #eee;
  text-align:left;vertical-align:top}
.curate-report table.wrap td{overflow-wrap:anywhere}
.curate-report td.n,.curate-report th.n{text-align:right;white-space:nowrap;
  font-variant-numeric:tabular-nums}
.curate-report code,.curate-report pre{font:12px ui-monospace,monospace}
.curate-report pre{background:#f6f6f6;padding:.6em;overflow:auto}
.curate-report .glance{font-size:15px}
.curate-report .note{color:#666;font-size:12px}
.curate-report svg.plot-svg{max-width:100%;height:auto;display:block}
.curate-report svg.plot-svg text{font-family:'DejaVu Sans',Arial,Helvetica,sans-serif}
.curate-report .grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(400px,1fr));
  gap:.6em 1.2em}
.curate-report figure{margin:0}
.curate-report figcaption{color:#666;font-size:12px;margin-left:2.5em}
.curate-report h3{font-size:1em;margin:1em 0 .3em}
"""


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def number(value: Any) -> str:
    """A count with thousands separators; a float with two decimals; None as a dash."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return str(value)


def table(
    header: Sequence[str],
    rows: Iterable[Sequence[Any]],
    numeric: frozenset[int] = frozenset(),
    wrap: bool = False,
) -> str:
    """A table; columns whose index is in `numeric` are right-aligned and formatted as counts.
    `wrap`: long values (hashes, paths) may break anywhere rather than widen the page."""
    head = (
        ""
        if not any(header)
        else "".join(
            f'<th class="n">{esc(h)}</th>' if i in numeric else f"<th>{esc(h)}</th>"
            for i, h in enumerate(header)
        )
    )
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="n">{esc(number(v))}</td>' if i in numeric else f"<td>{esc(v)}</td>"
            for i, v in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    head = f"<tr>{head}</tr>" if head else ""
    opening = '<table class="wrap">' if wrap else "<table>"
    return f"{opening}{head}{''.join(body)}</table>"


def pairs(items: Iterable[tuple[str, Any]]) -> str:
    """A two-column table of keys and values."""
    return table(("", ""), items, wrap=True)


def section(title: str, body: str, anchor: str) -> str:
    return f'<section id="{esc(anchor)}"><h2>{esc(title)}</h2>{body}</section>'


def details(summary: str, body: str) -> str:
    return f"<details><summary>{esc(summary)}</summary>{body}</details>"


def document(title: str, body: str) -> str:
    """A whole page: the report's root element in a document that fetches nothing."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{esc(title)}</title></head><body>{fragment(body)}</body></html>\n"
    )


def fragment(body: str) -> str:
    """The report's root element with its stylesheet: what a notebook displays."""
    return f'<div class="curate-report"><style>{CSS}</style>{body}</div>'

"""The per-stage table `curate run` and `curate show` print.

Beside the counts it says what a user would otherwise dig out of the manifest: how the
documents fell into splits, why records were quarantined and where to look, and a
warning when a run wrote nothing, which is almost always a recipe that does not match
its inputs (a wrong `text_field`, `id_field` or `chat.shape`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from curate.sizes import format_size
from curate.version import Version

WIDTH = 120  # the removed-by-reason column wraps within this many characters
REASONS_SHOWN = 3  # most common quarantine reasons printed


def render_summary(version: Version) -> str:
    m = version.manifest
    c = m["counts"]
    header = f"{'#':>2}  {'stage':<16}{'in':>12}{'out':>12}{'changed':>10}  {'time':>8}  removed"
    indent = len(header) - len("removed")
    lines = [header, "-" * len(header)]
    for s in m["stages"]:
        cells = (
            f"{s['position']:>2}  {s['name']:<16}{s['docs_in']:>12,}{s['docs_out']:>12,}"
            f"{s['changed']:>10,}  {s['seconds']:>7.2f}s  "
        )
        items = [f"{k}: {v:,}" for k, v in s["removed"].items()]
        wrapped = _packed(items + _cache_note(s.get("cache")), WIDTH - indent)
        lines.append(cells + wrapped[0])
        lines += [" " * indent + more for more in wrapped[1:]]
    size = sum(s["bytes"] for s in m["shards"])
    lines.append("-" * len(header))
    lines.append(
        f"read {c['read']:,}  written {c['written']:,}  removed {c['removed_total']:,}  "
        f"quarantined {c['quarantined']:,}  shards {len(m['shards'])} ({format_size(size)})  "
        f"in {m['timings']['total']:.2f}s"
    )
    if m.get("tokens") is not None:  # tokenized data: what a trainer budgets by
        lines[-1] += f"  tokens {m['tokens']:,}"
    if m.get("splits"):
        lines.append(_splits_line(m["splits"]["splits"]))
    if c["quarantined"]:
        lines.append(_quarantine_line(version))
    if c["read"] and not c["written"]:
        lines.append(_nothing_written(c))
    return "\n".join(lines)


def _cache_note(cache: dict[str, Any] | None) -> list[str]:
    """Whether the stage ran or its output came from the stage cache: from which version,
    what computing it had cost, and what reading it back cost this run; a barrier whose
    basis was partly computed: how many documents' came from the cache."""
    if not cache:
        return []
    computed, reused = cache.get("docs_computed") or 0, cache.get("docs_reused") or 0
    if not cache["reused"]:
        return [f"({reused:,}/{reused + computed:,} documents from the cache)"] if reused else []
    runs = ", ".join(cache["reused_from"][:3])
    share = "" if not cache["ran"] else f" {cache['reused']:,}/{cache['reused'] + cache['ran']:,}"
    figures = f"{cache.get('computed_seconds', 0.0):.2f}s of work"
    if cache.get("read_bytes"):
        figures += (
            f", {format_size(cache['read_bytes'])} read back in "
            f"{cache.get('read_seconds', 0.0):.2f}s"
        )
    if computed and reused:
        figures += f"; {reused:,}/{reused + computed:,} documents"
    return [f"(reused{share} from {runs}: {figures})"]


def _packed(items: list[str], width: int) -> list[str]:
    """Items joined by commas, as few lines of at most `width` as whole items allow."""
    lines = [""]
    for item in items:
        if lines[-1] and len(lines[-1]) + len(item) + 3 > width:  # ", " now, "," if cut after
            lines[-1] += ","
            lines.append("")
        lines[-1] += f", {item}" if lines[-1] else item
    return lines if items else ["-"]


def _splits_line(splits: dict[str, dict[str, Any]]) -> str:
    parts = []
    for name, s in splits.items():
        part = f"{name} {s['documents']:,}"
        extra = []
        if s.get("rows") is not None and s["rows"] != s["documents"]:
            extra.append(f"{s['rows']:,} rows")  # packed: rows are what a trainer steps over
        if s.get("tokens") is not None:
            extra.append(f"{s['tokens']:,} tokens")
        parts.append(part + (f" ({', '.join(extra)})" if extra else ""))
    return "splits: " + ", ".join(parts)


def _quarantine_line(version: Version) -> str:
    reasons = Counter(version.quarantined().column("reason").to_pylist())
    top = ", ".join(f"{reason} ({n:,})" for reason, n in reasons.most_common(REASONS_SHOWN))
    more = f", and {len(reasons) - REASONS_SHOWN} more" if len(reasons) > REASONS_SHOWN else ""
    return f"quarantined: {top}{more}; file and line of each in {version.path / 'quarantine'}"


def _nothing_written(c: dict[str, Any]) -> str:
    if c["quarantined"] == c["read"]:
        return (
            "warning: every record was quarantined, nothing written: check the recipe's "
            "text_field, id_field or chat.shape against the input's fields"
        )
    return "warning: nothing written: every document was removed by a stage or quarantined"

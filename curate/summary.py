"""The per-stage table `curate run` and `curate show` print."""

from __future__ import annotations

from curate.sizes import format_size
from curate.version import Version


def render_summary(version: Version) -> str:
    m = version.manifest
    c = m["counts"]
    header = f"{'#':>2}  {'stage':<16}{'in':>12}{'out':>12}{'changed':>10}  {'time':>8}  removed"
    lines = [header, "-" * len(header)]
    for s in m["stages"]:
        removed = ", ".join(f"{k}: {v:,}" for k, v in s["removed"].items()) or "-"
        lines.append(
            f"{s['position']:>2}  {s['name']:<16}{s['docs_in']:>12,}{s['docs_out']:>12,}"
            f"{s['changed']:>10,}  {s['seconds']:>7.2f}s  {removed}"
        )
    size = sum(s["bytes"] for s in m["shards"])
    lines.append("-" * len(header))
    lines.append(
        f"read {c['read']:,}  written {c['written']:,}  removed {c['removed_total']:,}  "
        f"quarantined {c['quarantined']:,}  shards {len(m['shards'])} ({format_size(size)})  "
        f"in {m['timings']['total']:.2f}s"
    )
    if m.get("tokens") is not None:  # tokenized data: what a trainer budgets by
        lines[-1] += f"  tokens {m['tokens']:,}"
    return "\n".join(lines)

"""The report's section on a mixture version (`curate mix`): per source, what the mixture
file asked (weight, target tokens, epoch cap) beside what was achieved (tokens to one
sample, samples, epochs), from the manifest's `mixture` record alone."""

from __future__ import annotations

from typing import Any

from curate.report.markup import esc, table


def target_vs_achieved(m: dict[str, Any]) -> str:
    record = m["mixture"]
    rows = [
        (s["name"], f"{s['dataset']} {s['version']}", round(s["weight"], 6),
         round(s["target_tokens"]), s["tokens"], s["tokens"] - round(s["target_tokens"]),
         s["samples"], s["rows"], round(s["epochs"], 3), s["max_epochs"])
        for s in record["sources"]
    ]  # fmt: skip
    header = ("source", "version", "weight", "target tokens", "achieved tokens", "difference",
              "samples", "rows", "epochs", "max epochs")  # fmt: skip
    note = (
        f'<p class="note">budget {record["budget"]:,} tokens, achieved {record["tokens"]:,} in '
        f"{record['samples']:,} samples; seed {esc(record['seed'])}; every prefix keeps each "
        f"source's share to {record['max_prefix_deviation']:.3f} samples "
        f"({esc(record['interleave'])})</p>"
    )
    return table(header, rows, frozenset(range(2, 10))) + note

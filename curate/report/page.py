"""The report of one version: the run at a glance, then each part of the manifest.

Sections, in the order a reader asks: how many documents and tokens came out of how
many read (and the funnel through the stages), what each stage removed and why, what
was quarantined, the inputs, the splits and packing, the tokenizer, the software, and
the recipe itself.
"""

from __future__ import annotations

from typing import Any

import yaml

from curate.report import distributions, examples, mixture, plots
from curate.report.facts import Facts, rules, tokenizer
from curate.report.markup import details, esc, number, pairs, section, table
from curate.sizes import format_size

N = frozenset({1, 2, 3, 4, 5, 6})


def render(facts: Facts) -> str:
    m = facts.manifest
    parts = [
        f"<h1>{esc(facts.title)}</h1>",
        f'<p class="note">fingerprint <code>{esc(facts.fingerprint)}</code>; '
        f"made {esc(m['started'])} to {esc(m['finished'])}</p>",
        f'<p class="glance">{esc(glance(m))}</p>',
        section("Funnel", plots.funnel([facts]) + (plots.tokens([facts]) or ""), "funnel"),
    ]
    removed = plots.removed([facts])
    if removed:
        parts.append(section("Removed, by stage and reason", removed, "removed"))
    if facts.examples:
        body = examples.render(facts.examples, facts.labels)
        parts.append(section("Examples of what was removed", body, "examples"))
    if m.get("mixture"):  # a mixture version: what each source was asked and gave
        body = mixture.target_vs_achieved(m)
        parts.append(section("Mixture: target vs achieved", body, "mixture"))
    parts.append(section("Stages", stages_table(m), "stages"))
    if facts.statistics:
        figures = distributions.one(facts.statistics, facts.labels, rules(m))
        body = distributions.render(figures, [facts.statistics]) + figures_table(facts)
        parts.append(section("Distributions", body, "distributions"))
    tallies = plots.tallies([facts])
    if tallies:
        parts.append(section("Tallies of each stage", tallies, "tallies"))
    if facts.quarantine:
        note = '<p class="note">file and line of each record in the version\'s quarantine/</p>'
        rows = table(("reason", "records"), facts.quarantine, frozenset({1}))
        parts.append(section("Quarantined", rows + note, "quarantine"))
    parts.append(section("Inputs", inputs_table(m, facts.statistics), "inputs"))
    if m.get("splits") or m.get("packing"):
        parts.append(section("Splits and packing", layout(m), "layout"))
    found = tokenizer(m)
    if found:
        parts.append(section("Tokenizer", pairs(found.items()), "tokenizer"))
    parts.append(section("Software", software(m), "software"))
    parts.append(section("Recipe", recipe(m), "recipe"))
    return "".join(parts)


def glance(m: dict[str, Any]) -> str:
    """One sentence: written of read, tokens, removed, quarantined, shards and their size."""
    c = m["counts"]
    size = format_size(sum(s["bytes"] for s in m["shards"]))
    tokens = f", {m['tokens']:,} tokens" if m.get("tokens") is not None else ""
    return (
        f"{c['written']:,} documents written{tokens} of {c['read']:,} records read; "
        f"{c['removed_total']:,} removed by stages, {c['quarantined']:,} quarantined; "
        f"{len(m['shards'])} shards ({size}) in {m['timings'].get('total', 0.0):.1f} s"
    )


def stages_table(m: dict[str, Any]) -> str:
    rows = []
    for s in m["stages"]:
        removed = ", ".join(f"{k}: {v:,}" for k, v in s["removed"].items()) or "-"
        cache = s.get("cache") or {}
        reused = f"{cache['reused']}/{cache['reused'] + cache['ran']}" if cache else "-"
        rows.append(
            (s["name"], s["position"], s["docs_in"], s["docs_out"], s["changed"],
             s["seconds"], reused, removed)
        )  # fmt: skip
    header = ("stage", "#", "in", "out", "changed", "seconds", "cached", "removed")
    return table(header, rows, N)


def inputs_table(m: dict[str, Any], stats: dict[str, Any] | None) -> str:
    """Each input: what was read from it and, with statistics, what of it was written."""
    sources = {s["input"]: s for s in (stats or {}).get("sources", [])}
    rows = []
    for i in m["inputs"]:
        out = sources.get(i["name"], {})
        rows.append(
            (i["name"], i["format"], format_size(i["size"]), i["documents"], i["quarantined"],
             out.get("written"), out.get("characters"), out.get("tokens"), i["content_hash"])
        )  # fmt: skip
    header = ("input", "format", "size", "documents", "quarantined", "written", "characters",
              "tokens", "content")  # fmt: skip
    return table(header, rows, frozenset({2, 3, 4, 5, 6, 7}), wrap=True)


def figures_table(facts: Facts) -> str:
    """Every sum of the statistics file, per stage (characters in, out, added and removed,
    tokens, documents each rule judged, values found per entity type...)."""
    assert facts.statistics is not None
    rows = [
        (facts.labels.get(s["position"], s["position"]), name, value)
        for s in facts.statistics["stages"]
        for name, value in s.get("sums", {}).items()
    ]
    return details(
        "every figure of the statistics file", table(("stage", "figure", ""), rows, frozenset({2}))
    )


def layout(m: dict[str, Any]) -> str:
    out = ""
    if m.get("splits"):
        record = m["splits"]
        rows = [
            (name, s["fraction"], s["documents"], s["rows"], s.get("tokens"), s["shards"],
             format_size(s["bytes"]))
            for name, s in record["splits"].items()
        ]  # fmt: skip
        header = ("split", "fraction", "documents", "rows", "tokens", "shards", "size")
        out += f"<p>method {esc(record['method'])}, seed {esc(record['seed'])}</p>"
        out += table(header, rows, N)
    if m.get("packing"):
        out += pairs((k, number(v)) for k, v in m["packing"].items() if k != "tail_shards")
    return out


def software(m: dict[str, Any]) -> str:
    engine = ", ".join(f"{k} {v}" for k, v in m["engine"].items() if v is not None)
    host = ", ".join(f"{k} {v}" for k, v in m["host"].items())
    return (
        pairs(sorted(m["software"].items()))
        + f'<p class="note">engine {esc(engine)}; host {esc(host)}</p>'
    )


def recipe(m: dict[str, Any]) -> str:
    text = yaml.safe_dump(m["recipe"], sort_keys=False, allow_unicode=True, width=100)
    where = m.get("recipe_path") or "(given in Python)"
    return details(f"resolved recipe, from {where}", f"<pre>{esc(text)}</pre>")

"""The report comparing two versions (A, B): counts side by side and plots overlaid, the
view a team uses to decide whether a change of recipe (a threshold, a stage) was right.

Stages are matched by name in order (`curate.explain.aligned`), so a stage inserted in
B shifts no other: the plots name a matched stage as A does, and a stage only one side
has draws a bar for that side alone.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from curate.explain import Side, aligned, compare
from curate.report import distributions, plots
from curate.report.facts import Facts, Step, rules, stage_label, tokenizer
from curate.report.markup import details, esc, section, table
from curate.report.page import glance, recipe
from curate.sizes import format_size


def render(a: Facts, b: Facts) -> str:
    a, b = _matched(a, b)
    changes = compare(Side.of_manifest("A", a.manifest), Side.of_manifest("B", b.manifest))
    parts = [
        f"<h1>{esc(a.title)} vs {esc(b.title)}</h1>",
        f'<p class="glance">A {esc(a.title)}: {esc(glance(a.manifest))}<br>'
        f"B {esc(b.title)}: {esc(glance(b.manifest))}</p>",
        section("Counts", counts_table(a, b), "counts"),
        section("What differs", "<pre>" + esc("\n".join(changes)) + "</pre>", "changes"),
        section("Funnel", plots.funnel([a, b]) + (plots.tokens([a, b]) or ""), "funnel"),
    ]
    removed = plots.removed([a, b])
    if removed:
        parts.append(section("Removed, by stage and reason", removed, "removed"))
        parts.append(section("Removed, side by side", removed_table(a, b), "removed-table"))
    tallies = plots.tallies([a, b])
    if tallies:
        parts.append(section("Tallies of each stage", tallies, "tallies"))
    if a.statistics and b.statistics:
        stats, labels = [a.statistics, b.statistics], [a.labels, b.labels]
        order = [rules(a.manifest), rules(b.manifest)]
        figures = distributions.both(stats, labels, [a.title, b.title], order)
        parts.append(
            section("Distributions", distributions.render(figures, stats), "distributions")
        )
    elif a.statistics or b.statistics:
        which = a.title if not a.statistics else b.title
        note = f"<p>{esc(which)} was made without statistics: nothing to overlay</p>"
        parts.append(section("Distributions", note, "distributions"))
    parts.append(section("Inputs", inputs_table(a.manifest, b.manifest), "inputs"))
    parts.append(section("Tokenizer and software", software_table(a, b), "software"))
    parts.append(
        section(
            "Recipes",
            details("A: " + a.title, recipe(a.manifest))
            + details("B: " + b.title, recipe(b.manifest)),
            "recipe",
        )
    )
    return "".join(parts)


def _matched(a: Facts, b: Facts) -> tuple[Facts, Facts]:
    """B's stages renamed as their match in A, so both plot in the same rows."""
    sa, sb = a.manifest["stages"], b.manifest["stages"]
    names = {}
    for i, j in aligned([s["name"] for s in sa], [s["name"] for s in sb]):
        if i is not None and j is not None:
            names[stage_label(sb[j])] = stage_label(sa[i])
    funnel = [Step(names.get(s.label, s.label), s.documents) for s in b.funnel]
    removed = [(names.get(st, st), reason, n) for st, reason, n in b.removed]
    labels = {pos: names.get(label, label) for pos, label in b.labels.items()}
    return a, replace(b, funnel=funnel, removed=removed, labels=labels)


def _delta(x: int | None, y: int | None) -> str:
    if x is None or y is None:
        return "-"
    return f"{y - x:+,}" if y != x else "0"


def counts_table(a: Facts, b: Facts) -> str:
    rows: list[tuple[Any, ...]] = []
    ca, cb = a.manifest["counts"], b.manifest["counts"]
    for key in ("read", "documents", "written", "removed_total", "quarantined"):
        rows.append((key.replace("_", " "), ca[key], cb[key], _delta(ca[key], cb[key])))
    ta, tb = a.manifest.get("tokens"), b.manifest.get("tokens")
    if ta is not None or tb is not None:
        rows.append(("tokens", ta, tb, _delta(ta, tb)))
    for step_a, step_b in _pairs([s.label for s in a.funnel[2:]], [s.label for s in b.funnel[2:]]):
        x = next((s.documents for s in a.funnel[2:] if s.label == step_a), None)
        y = next((s.documents for s in b.funnel[2:] if s.label == step_b), None)
        rows.append((f"after {step_a or step_b}", x, y, _delta(x, y)))
    size_a = sum(s["bytes"] for s in a.manifest["shards"])
    size_b = sum(s["bytes"] for s in b.manifest["shards"])
    rows.append(("shards' size", format_size(size_a), format_size(size_b), ""))
    return table(("", "A", "B", "B - A"), rows, frozenset({1, 2, 3}))


def _pairs(a: list[str], b: list[str]) -> list[tuple[str | None, str | None]]:
    """Labels of both sides in A's order, then those only B has."""
    return [(x, x if x in b else None) for x in a] + [(None, y) for y in b if y not in a]


def removed_table(a: Facts, b: Facts) -> str:
    ra = {(s, r): n for s, r, n in a.removed}
    rb = {(s, r): n for s, r, n in b.removed}
    keys = list(ra) + [k for k in rb if k not in ra]
    rows = [
        (
            f"{s}: {r}",
            ra.get((s, r), 0),
            rb.get((s, r), 0),
            _delta(ra.get((s, r), 0), rb.get((s, r), 0)),
        )
        for s, r in keys
    ]
    return table(("stage: reason", "A", "B", "B - A"), rows, frozenset({1, 2, 3}))


def inputs_table(ma: dict[str, Any], mb: dict[str, Any]) -> str:
    ia = {i["name"]: i for i in ma["inputs"]}
    ib = {i["name"]: i for i in mb["inputs"]}
    rows = []
    for name in list(ia) + [n for n in ib if n not in ia]:
        x, y = ia.get(name), ib.get(name)
        same = x is not None and y is not None and x["content_hash"] == y["content_hash"]
        rows.append(
            (name, x and x["documents"], y and y["documents"],
             "same" if same else "only in A" if y is None else "only in B" if x is None
             else "changed")
        )  # fmt: skip
    return table(("input", "documents A", "documents B", "content"), rows, frozenset({1, 2}))


def software_table(a: Facts, b: Facts) -> str:
    """Tokenizer entries and library versions, A and B, those that differ first."""
    xa = {f"tokenizer {k}": v for k, v in (tokenizer(a.manifest) or {}).items()}
    xb = {f"tokenizer {k}": v for k, v in (tokenizer(b.manifest) or {}).items()}
    xa |= a.manifest["software"]
    xb |= b.manifest["software"]
    keys = list(xa) + [k for k in xb if k not in xa]
    rows = [(k, xa.get(k, "-"), xb.get(k, "-")) for k in keys]
    differ = [r for r in rows if r[1] != r[2]]
    same = [(k, x) for k, x, y in rows if x == y]
    out = (
        table(("", "A", "B"), differ, wrap=True)
        if differ
        else "<p>the same tokenizer and software</p>"
    )
    return out + details(
        f"{len(same)} entries the same in both", table(("", "A and B"), same, wrap=True)
    )

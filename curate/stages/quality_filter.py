"""Dropping documents by the published heuristic quality rules (Gopher, C4, FineWeb).

Each rule set is a block of the recipe; `false` (or null) switches a whole set off, a
rule's threshold set to null switches that rule off, and every default is the
published value (see `curate.quality` and docs/quality-filters.md):

```yaml
- quality_filter:
    gopher_quality: {min_doc_words: 20}
    gopher_repetition: {}
    c4: false
    fineweb: {max_dup_line_char_ratio: 0.1}
```

A removed document's reason names the rule set and the first rule it failed, in
datatrove's order (`gopher_repetition:dup_line_frac`). Rule sets run one after another
on the documents the earlier ones kept, so a batch's words are split once and most
n-gram work is spent only on documents still in the running.

C4's rules remove lines by default, as C4 and datatrove's C4QualityFilter do: a kept
document's text becomes the lines C4 kept, the rule sets after it (FineWeb) judge that
text, the stage counts such documents as changed and the lines each rule removed
(counters `lines_removed:c4:<rule>`). `c4: {remove_lines: false}` only decides.

A conversation (chat records) is judged by the contents of its messages of the chosen
`roles` (default: all) joined by a blank line, so each message is its own paragraph and
line for the line and paragraph rules, and it is kept or removed whole. C4's line removal
works per message: each chosen message keeps its own kept lines (a message may be left
empty; the others, and every role, stay), and FineWeb judges those contents joined again.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from curate.chat.contents import Roles, Units, joined, put_back, roles_field
from curate.io.batches import ID
from curate.quality.params import (
    C4Params,
    FineWebParams,
    GopherQualityParams,
    GopherRepetitionParams,
)
from curate.reasons import QUALITY_RULE
from curate.stages.base import FilterStage, StageParams, StageResult, rejected_table
from curate.stats import LOG2, UNIT, Stats, linear

if TYPE_CHECKING:
    from curate.quality.docs import Measured  # polars: imported on the first batch


def _false_turns_off(schema: dict[str, Any]) -> None:
    """The recipe schema accepts `false` for a rule set, as validation does."""
    schema.setdefault("anyOf", []).append({"const": False})


class QualityFilterParams(StageParams):
    gopher_repetition: GopherRepetitionParams | None = Field(
        default_factory=GopherRepetitionParams,
        description="Gopher repetition rules (Rae et al. 2021, table A1); false: off.",
        json_schema_extra=_false_turns_off,
    )
    gopher_quality: GopherQualityParams | None = Field(
        default_factory=GopherQualityParams,
        description="Gopher quality rules (Rae et al. 2021, A.1.1); false: off.",
        json_schema_extra=_false_turns_off,
    )
    c4: C4Params | None = Field(
        default_factory=C4Params,
        description="C4 rules (Raffel et al. 2020, 2.2); false: off.",
        json_schema_extra=_false_turns_off,
    )
    fineweb: FineWebParams | None = Field(
        default_factory=FineWebParams,
        description="FineWeb's added rules (Penedo et al. 2024, 3.3); false: off.",
        json_schema_extra=_false_turns_off,
    )
    roles: Roles | None = roles_field()

    def __init__(self, **data: Any) -> None:
        # `c4: false` reads better in YAML than `c4: null`
        super().__init__(**{k: (None if v is False else v) for k, v in data.items()})


@dataclass
class Judgement:
    """What the rule sets made of a batch: verdicts in evaluation order, measured values,
    and (c4 with `remove_lines`) the text each document is left with."""

    verdicts: list[tuple[str, np.ndarray]]
    measured: dict[str, Measured]
    texts: pa.Array | None = None
    """Per document (or, with `units`, per unit: message), the text after line removal;
    None when no rule set removes lines."""
    lines_removed: dict[str, np.ndarray] = field(default_factory=dict)
    """"lines_removed:c4:<line rule>" and "citations_removed:c4" -> per document, the lines
    (citation marks) removed."""


def evaluate_rules(
    texts: pa.Array | pa.ChunkedArray, params: QualityFilterParams, shortcut: bool = True
) -> list[tuple[str, np.ndarray]]:
    """("rule_set:rule", fails) for every enabled rule, in evaluation order.

    With `shortcut`, a rule set only looks at documents the earlier sets kept (what the
    stage does); without it every rule judges every document (what `inspect-filter`
    shows: how many each rule would remove on its own). A rule set after c4 judges the
    text c4's line removal left (both ways).
    """
    return judge(texts, params, shortcut).verdicts


def evaluate_measured(
    texts: pa.Array | pa.ChunkedArray, params: QualityFilterParams, shortcut: bool = True
) -> tuple[list[tuple[str, np.ndarray]], dict[str, Measured]]:
    """`evaluate_rules`, and what each threshold rule measured on every document (nan
    where it measured nothing), by "rule_set:rule"."""
    j = judge(texts, params, shortcut)
    return j.verdicts, j.measured


def judge(
    texts: pa.Array | pa.ChunkedArray,
    params: QualityFilterParams,
    shortcut: bool = True,
    units: Units | None = None,
) -> Judgement:
    """Every enabled rule set over the batch in order (`evaluate_rules`), with the text
    line removal leaves. `units` (chat records): `texts` are their rows' joined contents;
    lines are removed from each message on its own, and the rule sets after c4 judge the
    kept contents joined again."""
    # the rules work on polars: imported on the first batch, never by a no-op prepare()
    import polars as pl

    from curate.quality.docs import DocBatch
    from curate.quality.rulesets import RULE_SETS

    docs = DocBatch(texts)
    n = docs.n
    alive = np.ones(n, dtype=bool)
    j = Judgement([], {})
    for name, (_, evaluate) in RULE_SETS.items():
        p = getattr(params, name)
        if p is None:
            continue
        where = np.flatnonzero(alive)
        sub = docs.subset(alive) if shortcut and not alive.all() else docs
        sub.measured = {}
        sub.rewrite = None
        inside = np.ones(sub.n, dtype=bool) if sub is not docs else alive
        for rule, fails in evaluate(sub, p, inside, shortcut):
            full = fails
            if sub is not docs:  # later rule sets see only the documents still in
                full = np.zeros(n, dtype=bool)
                full[where] = fails
            j.verdicts.append((f"{name}:{rule}", full))
            if shortcut:
                alive &= ~full
        for rule, m in sub.measured.items():
            if sub is not docs:
                values = np.full(n, np.nan)
                values[where] = m.values
                m = replace(m, values=values)
            j.measured[f"{name}:{rule}"] = m
        if sub.rewrite is None:
            continue
        if units is not None:  # chat: each message's lines, and the joined kept contents
            per_unit = DocBatch(units.texts)
            evaluate(per_unit, p, np.ones(per_unit.n, dtype=bool), shortcut)
            j.texts = _array(per_unit.rewrite.texts.to_arrow()).cast(pa.string())
            for rule, lines in per_unit.rewrite.removed.items():
                j.lines_removed[f"lines_removed:{name}:{rule}"] = _sum(units.rows, lines, n)
            j.lines_removed[f"citations_removed:{name}"] = _sum(
                units.rows, per_unit.rewrite.citations, n
            )
            del sub
            docs = DocBatch(joined(replace(units, texts=_array(j.texts))))
            continue
        new, rewrite = sub.rewrite.texts, sub.rewrite
        removed = {f"lines_removed:{name}:{r}": v for r, v in rewrite.removed.items()}
        removed[f"citations_removed:{name}"] = rewrite.citations
        if sub is not docs:
            full_text = docs.texts.to_arrow()
            mask = np.zeros(n, dtype=bool)
            mask[where] = True
            new = pl.Series(pc.replace_with_mask(full_text, pa.array(mask), new.to_arrow()))
            for rule, lines in removed.items():
                spread = np.zeros(n, dtype=np.int64)
                spread[where] = lines
                removed[rule] = spread
        j.lines_removed.update(removed)
        j.texts = _array(new.to_arrow()).cast(pa.string())
        del sub  # the words split so far are not the new text's: let them go (docs too)
        docs = DocBatch(new)
    return j


def _sum(rows: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(rows, values, n).astype(np.int64)


def _array(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


_SCHEMES = {"ratio": UNIT, "count": LOG2, "length": linear(0, 20, 40)}
"""How each kind of measured value is binned: ratios in twenty bins of 0.05, word and
sentence counts in powers of two, mean word lengths in half characters up to 20."""


def rule_statistics(
    verdicts: list[tuple[str, np.ndarray]], measured: dict[str, Measured], n: int
) -> tuple[np.ndarray, np.ndarray, Stats]:
    """The keep mask and reasons from the verdicts (first failed rule, in order), and per
    rule the statistics of the documents it judged, which are those every earlier rule
    kept: `rule/<set:rule>/evaluated` (documents), and for a threshold rule the histogram
    `rule/<set:rule>` of its measured value with the threshold marked (`min` or `max`)."""
    keep = np.ones(n, dtype=bool)
    reasons = np.full(n, None, dtype=object)
    stats = Stats()
    for rule, fails in verdicts:
        stats.count(f"rule/{rule}/evaluated", int(keep.sum()))
        m = measured.get(rule)
        if m is not None:
            values = m.values[keep]
            values = values[~np.isnan(values)]
            if m.kind == "count":
                values = values.astype(np.int64)
            stats.histogram(
                f"rule/{rule}", values, _SCHEMES[m.kind], m.kind, **{m.bound: m.threshold}
            )
        hit = fails & keep
        reasons[hit] = QUALITY_RULE(rule=rule)
        keep &= ~hit
    return keep, reasons, stats


class QualityFilter(FilterStage[QualityFilterParams]):
    """Drops documents failing the Gopher, C4 or FineWeb rules (reason: rule set and rule).

    With c4's `remove_lines` (the default) a kept document keeps only the lines C4 keeps."""

    name = "quality_filter"
    Params = QualityFilterParams
    reads = ("text",)
    shapes = ("text", "chat")

    def software(self) -> dict[str, str]:
        return {"polars": version("polars")}  # without importing it (a no-op prepare)

    def explain(self, batch: pa.RecordBatch) -> list[tuple[str, np.ndarray]]:
        """Every rule's verdict on every document, each as if alone (for inspect-filter)."""
        text = self.document_texts(batch)
        return evaluate_rules(text, self.params, shortcut=False)

    def describe(self) -> dict[str, Any]:
        """The rules in the order they judge a document (each sees only the documents every
        earlier one kept: the statistics' `rule/...` figures count those)."""
        verdicts = evaluate_rules(pa.array([], pa.string()), self.params)
        return {"rules": [rule for rule, _ in verdicts]}

    def keep(self, batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray]:
        return self.keep_with_stats(batch)[:2]

    def keep_with_stats(self, batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray, Stats]:
        keep, reasons, stats, _ = self._judge(batch)
        return keep, reasons, stats

    def process(self, batch: pa.RecordBatch) -> StageResult:
        """Removes the documents that fail, and writes back the text line removal left to
        the ones kept: `changed` counts those whose text it shortened, and the counters
        `lines_removed:c4:<line rule>` the lines each rule removed from them
        (`citations_removed:c4`: the citation marks cut from kept lines)."""
        keep, reasons, stats, j = self._judge(batch)
        changed = 0
        counters: dict[str, int] = {}
        if j.texts is not None:
            u = self.text_units(batch)
            differs = pc.fill_null(pc.not_equal(u.texts, j.texts), False).to_numpy(
                zero_copy_only=False
            )
            differs &= keep[u.rows]
            if differs.any():
                mask = pa.array(differs)
                batch = put_back(
                    batch, self.text_field, u, pc.if_else(mask, j.texts.cast(u.texts.type), u.texts)
                )
                changed = int(u.any_per_row(differs).sum())
            counters = {rule: int(lines[keep].sum()) for rule, lines in j.lines_removed.items()}
            counters = {rule: v for rule, v in counters.items() if v}
        if keep.all():
            return StageResult(batch, changed=changed, counters=counters, stats=stats)
        dropped = np.flatnonzero(~keep)
        ids = pc.take(batch.column(ID), pa.array(dropped))
        removed = rejected_table(self.name, ids, [reasons[i] for i in dropped])
        return StageResult(
            batch.filter(pa.array(keep)),
            changed=changed,
            removed=removed,
            counters=counters,
            stats=stats,
        )

    def _judge(self, batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray, Stats, Judgement]:
        u = self.text_units(batch)
        j = judge(joined(u), self.params, units=u if u.chat else None)
        keep, reasons, stats = rule_statistics(j.verdicts, j.measured, batch.num_rows)
        return keep, reasons, stats if self.context.stats else Stats(), j

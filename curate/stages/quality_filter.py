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

A conversation (chat records) is judged by the contents of its messages of the chosen
`roles` (default: all) joined by a blank line, so each message is its own paragraph and
line for the line and paragraph rules, and it is kept or removed whole.
"""

from __future__ import annotations

from dataclasses import replace
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from pydantic import Field

from curate.chat.contents import Roles, roles_field
from curate.quality.params import (
    C4Params,
    FineWebParams,
    GopherQualityParams,
    GopherRepetitionParams,
)
from curate.reasons import QUALITY_RULE
from curate.stages.base import FilterStage, StageParams
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


def evaluate_rules(
    texts: pa.Array | pa.ChunkedArray, params: QualityFilterParams, shortcut: bool = True
) -> list[tuple[str, np.ndarray]]:
    """("rule_set:rule", fails) for every enabled rule, in evaluation order.

    With `shortcut`, a rule set only looks at documents the earlier sets kept (what the
    stage does); without it every rule judges every document (what `inspect-filter`
    shows: how many each rule would remove on its own).
    """
    return evaluate_measured(texts, params, shortcut)[0]


def evaluate_measured(
    texts: pa.Array | pa.ChunkedArray, params: QualityFilterParams, shortcut: bool = True
) -> tuple[list[tuple[str, np.ndarray]], dict[str, Measured]]:
    """`evaluate_rules`, and what each threshold rule measured on every document (nan
    where it measured nothing), by "rule_set:rule"."""
    # the rules work on polars: imported on the first batch, never by a no-op prepare()
    from curate.quality.docs import DocBatch
    from curate.quality.rulesets import RULE_SETS

    docs = DocBatch(texts)
    n = docs.n
    alive = np.ones(n, dtype=bool)
    out: list[tuple[str, np.ndarray]] = []
    measured: dict[str, Measured] = {}
    for name, (_, evaluate) in RULE_SETS.items():
        p = getattr(params, name)
        if p is None:
            continue
        if shortcut and not alive.all():  # later rule sets see only the documents still in
            where = np.flatnonzero(alive)
            sub = docs.subset(alive)
            for rule, fails in evaluate(sub, p, np.ones(sub.n, dtype=bool), shortcut):
                full = np.zeros(n, dtype=bool)
                full[where] = fails
                out.append((f"{name}:{rule}", full))
                alive &= ~full
            for rule, m in sub.measured.items():
                values = np.full(n, np.nan)
                values[where] = m.values
                measured[f"{name}:{rule}"] = replace(m, values=values)
            continue
        docs.measured = {}
        for rule, fails in evaluate(docs, p, alive, shortcut):
            out.append((f"{name}:{rule}", fails))
            if shortcut:
                alive &= ~fails
        measured.update({f"{name}:{rule}": m for rule, m in docs.measured.items()})
    return out, measured


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
    """Drops documents failing the Gopher, C4 or FineWeb rules (reason: rule set and rule)."""

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
        text = self.document_texts(batch)
        verdicts, measured = evaluate_measured(text, self.params)
        keep, reasons, stats = rule_statistics(verdicts, measured, batch.num_rows)
        return keep, reasons, stats if self.context.stats else Stats()

"""What a filter would remove from a sample of the inputs, rule by rule: for tuning.

```python
from curate.inspect_filter import inspect_filter
report = inspect_filter("recipes/sample.yaml", stage="quality_filter", sample=1000)
print(report)                 # per rule: removed alone, removed as first reason, examples
report.examples["gopher_quality:min_doc_words"]   # [(id, text), ...]
report.counters["lines_removed:c4:terminal_punct"]  # a stage that changes text: its tallies
report.changes                # [(id, text before, text after), ...] of documents it changed
```

The sample is read in input order, spread over the partitions (an equal share from
the start of each), and goes through the recipe's map stages before the filter (a
barrier before it is skipped: it needs every document; a barrier inspected is run on the
sample as if it were the corpus, `curate.inspect_barrier`). Nothing is written. A stage
whose `explain(batch)` names its rules (quality_filter, url_filter) reports every rule on
every document, so a rule's "alone" count is what it would remove with all other rules off;
any other filter reports the reasons it gives. A stage with a `shown(batch)` method
(url_filter: the URL) has that shown before each example's text.
What the stage changes in the documents it keeps (quality_filter's C4 line removal) is
reported too: how many it changed, its counters (lines removed per rule), and examples
before and after.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from curate.errors import CurateError
from curate.inspect_barrier import ON_SAMPLE, on_sample
from curate.io.batches import ID, TEXT, FieldSpec
from curate.io.inputs import discover_inputs
from curate.io.partitions import plan_partitions
from curate.reading import read_partition
from curate.recipe import Recipe
from curate.stages.base import BarrierStage, MapStage, Stage, StageCounts, StageResult
from curate.stages.chain import run_maps


@dataclass
class FilterReport:
    stage: str
    documents: int
    skipped_barriers: list[str]
    alone: dict[str, int] = field(default_factory=dict)
    first: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    changed: int = 0
    """Documents the stage kept with a changed text."""
    counters: dict[str, int] = field(default_factory=dict)
    """The stage's own tallies (quality_filter: `lines_removed:c4:<rule>`)."""
    changes: list[tuple[str, str, str]] = field(default_factory=list)
    """(id, text before, text after) of the first documents it changed."""
    scores: Any = None
    """A scoring stage's (classifier) score histogram and examples either side of its
    bounds, from its `score_report(batch, ids, texts, examples)`; None for other stages."""

    @property
    def removed(self) -> int:
        return sum(self.first.values())

    def __str__(self) -> str:
        text = self._rules()
        return text if self.scores is None else f"{text}\n\n{self.scores}"

    def _rules(self) -> str:
        width = max([len(r) for r in self.alone] + [len(r) for r in self.first] + [4])
        lines = [
            f"{self.stage} on a sample of {self.documents:,} documents: removes {self.removed:,} "
            f"({self.removed / max(self.documents, 1):.1%})",
        ]
        if self.skipped_barriers:
            lines.append(f"(skipped barrier stages before it: {', '.join(self.skipped_barriers)})")
        if not self.alone and not self.first:
            lines += ["", f"{self.stage} gave no removal reason for this sample (a stage that "
                      "changes text, such as normalize, removes nothing by design)"]  # fmt: skip
            return "\n".join(lines + self._changes())
        lines += ["", f"{'rule':<{width}}  {'alone':>7}  {'first':>7}", "-" * (width + 18)]
        for rule in sorted(set(self.alone) | set(self.first), key=self._order):
            lines.append(
                f"{rule:<{width}}  {self.alone.get(rule, 0):>7,}  {self.first.get(rule, 0):>7,}"
            )
        for rule, found in self.examples.items():
            if not found:
                continue
            lines += ["", f"{rule}:"]
            for doc_id, text in found:
                lines.append(f"  {doc_id}: {_snippet(text)}")
        return "\n".join(lines + self._changes())

    def _changes(self) -> list[str]:
        if not self.changed:
            return []
        lines = ["", f"changes the text of {self.changed:,} kept documents"]
        width = max(len(c) for c in self.counters) if self.counters else 0
        for name, count in self.counters.items():
            lines.append(f"  {name:<{width}}  {count:>7,}")
        for doc_id, before, after in self.changes:
            kept = set(after.splitlines())
            gone = [line.strip() for line in before.splitlines() if line not in kept]
            gone = [line for line in gone if line and line not in kept]
            lines += ["", f"{doc_id}:", f"  before: {_snippet(before)}"]
            lines.append(f"  after:  {_snippet(after)}")
            if gone:
                shown = "; ".join(_snippet(line, 60) for line in gone[:4])
                more = f" (+{len(gone) - 4} more)" if len(gone) > 4 else ""
                lines.append(f"  lines gone: {shown}{more}")
        return lines

    def _order(self, rule: str) -> tuple[int, str]:
        keys = list(self.alone) + [r for r in self.first if r not in self.alone]
        return (keys.index(rule), rule)


def _snippet(text: str, width: int = 160) -> str:
    flat = " ".join(text.split())
    return flat[:width] + ("…" if len(flat) > width else "")


def sample_batch(recipe: Recipe, sample: int) -> pa.RecordBatch:
    files = discover_inputs(recipe.inputs, recipe.base_dir)
    parts = plan_partitions(files, recipe.partition_size)
    fields = FieldSpec(recipe.text_field, recipe.id_field, recipe.keep_fields(), chat=recipe.chat)
    share = -(-sample // max(len(parts), 1))
    batches: list[pa.RecordBatch] = []
    for part in parts:
        got = 0
        for chunk in read_partition(part, fields, on_error="quarantine", batch_bytes=1 << 20):
            take = chunk.batch.slice(0, share - got)
            batches.append(take)
            got += take.num_rows
            if got >= share:
                break
    if not batches:
        return pa.RecordBatch.from_pylist([], fields.schema())
    table = pa.Table.from_batches(batches).slice(0, sample).combine_chunks()
    return table.to_batches()[0] if table.num_rows else table.schema.empty_table().to_batches()[0]


def inspect_filter(
    recipe: Recipe | str | os.PathLike[str], stage: str, sample: int = 1000, examples: int = 3
) -> FilterReport:
    """Run the recipe's map stages up to `stage` (a name or a 0-based position) on a sample."""
    if not isinstance(recipe, Recipe):
        from pathlib import Path

        recipe = Recipe.load(Path(recipe))
    with recipe.located():  # an input or a stage's file that is not there names its line
        return _inspect(recipe, stage, sample, examples)


def _inspect(recipe: Recipe, stage: str, sample: int, examples: int) -> FilterReport:
    stages = recipe.build_stages()
    index = _find(stages, stage)
    target = stages[index]
    batch = sample_batch(recipe, sample)
    before = stages[:index]
    skipped = [s.name for s in before if isinstance(s, BarrierStage)]
    maps = [s for s in before if isinstance(s, MapStage)]
    for s in maps:
        s.setup()
    batch = run_maps(batch, maps, [StageCounts() for _ in maps], [])
    target.setup()
    barrier = isinstance(target, BarrierStage)  # run on the sample as if it were the corpus
    note = getattr(target, "sample_note", ON_SAMPLE)  # (curate.inspect_barrier)
    name = f"{target.name} {note}" if barrier else target.name
    report = FilterReport(name, batch.num_rows, skipped)
    if batch.num_rows == 0:
        return report
    ids = batch.column(ID).to_pylist()
    shown = TEXT in batch.schema.names or target.context.chat  # chat: the joined contents
    texts = target.document_texts(batch).to_pylist() if shown else [""] * len(ids)
    plain = texts if shown else None  # before a stage's change, without a label
    label = getattr(target, "shown", None)  # url_filter: what it judged, the URL, goes first
    if label is not None:
        texts = [f"{u} | {t}" for u, t in zip(label(batch), texts, strict=True)]
    first = np.full(batch.num_rows, None, dtype=object)
    if isinstance(target, BarrierStage):
        rules, result = None, on_sample(target, batch)
    else:
        assert isinstance(target, MapStage)
        rules, result = target.explain(batch), target.process(batch)
    _changes(report, target, result, ids, plain, examples)
    if rules is not None:
        for rule, fails in rules:
            report.alone[rule] = int(fails.sum())
            first[fails & (first == None)] = rule  # noqa: E711
            report.examples[rule] = [(ids[i], texts[i]) for i in np.flatnonzero(fails)[:examples]]
    else:
        if result.removed is not None:
            where = {d: i for i, d in enumerate(ids)}
            for doc_id, reason in zip(
                result.removed.column("id").to_pylist(),
                result.removed.column("reason").to_pylist(),
                strict=True,
            ):
                first[where[doc_id]] = reason
    for rule in [r for r in first if r is not None]:
        report.first[rule] = report.first.get(rule, 0) + 1
    if rules is None:
        for rule in report.first:
            hits = [i for i, r in enumerate(first) if r == rule][:examples]
            report.examples[rule] = [(ids[i], texts[i]) for i in hits]
    scored = getattr(target, "score_report", None)
    if scored is not None:
        report.scores = scored(batch, ids, texts, examples)
    return report


def _changes(
    report: FilterReport,
    stage: Stage,
    result: StageResult,
    ids: list[str],
    texts: list[str] | None,
    examples: int,
) -> None:
    """What the stage changed in the documents it kept: count, tallies, before and after."""
    report.changed = result.changed
    report.counters = dict(result.counters or {})
    if not result.changed or texts is None or result.batch.num_rows == 0:
        return
    before = dict(zip(ids, texts, strict=True))
    after = stage.document_texts(result.batch).to_pylist()
    for doc_id, text in zip(result.batch.column(ID).to_pylist(), after, strict=True):
        if len(report.changes) >= examples:
            break
        if text != before[doc_id]:
            report.changes.append((doc_id, before[doc_id], text or ""))


def _find(stages: list[Any], stage: str) -> int:
    if stage.isdigit() and int(stage) < len(stages):
        return int(stage)
    for i, s in enumerate(stages):
        if s.name == stage:
            return i
    names = ", ".join(f"{i}:{s.name}" for i, s in enumerate(stages))
    raise CurateError(f"inspect-filter: the recipe has no stage {stage!r} (stages: {names})")

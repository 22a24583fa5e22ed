"""Composing stages in code, for notebooks and quick experiments without YAML.

```python
from curate import Pipeline
p = Pipeline().add("normalize", form="NFKC").add("exact_dedup")
result = p.process([{"text": "a"}, {"text": "a"}])   # in memory, one process
result.table, result.rejected, result.counts
version = p.run(["data/*.jsonl"], name="demo", root="curated")   # a real, published version

chat = Pipeline(chat="sharegpt").add("chat_template", source="models/m", pack={"seq_len": 4096})
chat.process(records).table          # input_ids, labels, position_ids, cu_seqlens, ...
```
`process` runs the same stage objects the engines run, barriers included, on data
small enough to hold in memory, and packs rows as the shard writer does when the last
stage asks for it; chat records become a `messages` column as the chat reader makes it,
and those that cannot be a conversation are in `result.quarantined` with the reason.
`run` builds a Recipe and goes through `curate.run`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from curate.chat.reader import lone_surrogate, messages_array
from curate.chat.shapes import to_messages
from curate.chat.spec import MESSAGES, ChatInput
from curate.collective.local import LocalSummaries
from curate.errors import CurateError
from curate.io.batches import ID, ORDER
from curate.output.packing import packing_for
from curate.plan import make_plan
from curate.recipe import Recipe, StageSpec, build_stage, shape_problems
from curate.stages.base import (
    DECISION_SCHEMA,
    REJECTED_SCHEMA,
    Stage,
    StageCounts,
)
from curate.stages.chain import build_stages, run_maps
from curate.version import Version

QUARANTINED = pa.schema([pa.field(ID, pa.string()), pa.field("reason", pa.string())])


@dataclass
class PipelineResult:
    table: pa.Table
    rejected: pa.Table
    counts: dict[str, StageCounts] = field(default_factory=dict)
    quarantined: pa.Table = field(default_factory=lambda: QUARANTINED.empty_table())
    """Chat records that are no conversation (id, reason), as the chat reader quarantines."""

    def __repr__(self) -> str:
        parts = ", ".join(f"{name}: {c.docs_in}->{c.docs_out}" for name, c in self.counts.items())
        return f"PipelineResult({self.table.num_rows} rows; {parts})"


class Pipeline:
    """An ordered list of stages, built in code."""

    def __init__(
        self, stages: Iterable[Mapping[str, Any]] = (), *, text_field: str = "text",
        chat: str | Mapping[str, Any] | ChatInput | None = None,
    ) -> None:  # fmt: skip
        """`chat`: the records are conversations: a shape name (`messages`, `sharegpt`,
        `alpaca`, `auto`) or the recipe's `chat:` mapping."""
        self.text_field = text_field
        if isinstance(chat, str):
            chat = {"shape": chat}
        self.chat = ChatInput.model_validate(chat) if chat is not None else None
        self.entries: list[dict[str, Any]] = [dict(e) for e in stages]
        self._specs("Pipeline")

    def add(self, stage: str, **params: Any) -> Pipeline:
        """Append a stage by recipe name or dotted path; returns the pipeline for chaining.
        An unknown stage or a bad parameter fails here, as it would in a recipe, not later
        in `process()`."""
        self.entries.append({stage: params})
        try:
            self._specs(f"Pipeline.add({stage!r})")
        except CurateError:
            self.entries.pop()
            raise
        return self

    def _specs(self, where: str) -> list[StageSpec]:
        """The entries as validated stage specs, or a CurateError saying what is wrong."""
        try:
            specs = [build_stage(entry, i) for i, entry in enumerate(self.entries)]
        except CurateError as exc:  # the recipe's own type for it is private
            raise CurateError(f"{where}: {exc}") from None
        problems = shape_problems(specs, chat=self.chat is not None)
        if problems:
            raise CurateError(
                f"{where}: "
                + "; ".join(f"{'.'.join(map(str, loc))}: {msg}" for loc, msg in problems)
            )
        return specs

    def stages(self) -> list[Stage]:
        return build_stages(
            self._specs("Pipeline"), text_field=self.text_field, chat=self.chat is not None
        )

    def process(self, data: pa.Table | Iterable[Mapping[str, Any]]) -> PipelineResult:
        """Run every stage over in-memory data and return what remains and what was removed."""
        quarantined = QUARANTINED.empty_table()
        if self.chat is not None:
            table, quarantined = _chat_table(data, self.chat)
        else:
            table = data if isinstance(data, pa.Table) else pa.Table.from_pylist(list(data))
        if self.chat is None and self.text_field not in table.column_names:
            raise CurateError(
                f"Pipeline.process: the data has no {self.text_field!r} field (fields: "
                f"{', '.join(table.column_names) or 'none'}); pass text_field= to Pipeline()"
            )
        if ID not in table.column_names:
            table = table.append_column(ID, pa.array([str(i) for i in range(table.num_rows)]))
        table = table.append_column(ORDER, pa.array(np.arange(table.num_rows, dtype=np.uint64)))
        stages = self.stages()
        for s in stages:
            s.setup()
        counts = {f"{i}:{s.name}": StageCounts() for i, s in enumerate(stages)}
        labels = {id(s): f"{i}:{s.name}" for i, s in enumerate(stages)}
        rejected: list[pa.Table] = []
        for segment in make_plan(stages):
            batch = table.combine_chunks().to_batches()[0] if table.num_rows else None
            if batch is None:
                break
            batch = run_maps(
                batch, segment.maps, [counts[labels[id(s)]] for s in segment.maps], rejected
            )
            if segment.barrier is not None:
                b = segment.barrier
                decision = b.decide(LocalSummaries.from_tables([b.summarize(batch)]))
                decision = decision.collect(DECISION_SCHEMA).sort_by(ORDER)
                kept = b.apply(batch, decision.column(ID)).batch
                c = counts[labels[id(b)]]
                c.docs_in, c.docs_out = batch.num_rows, kept.num_rows
                c.removed.update(decision.column("reason").to_pylist())
                rejected.append(decision.select(REJECTED_SCHEMA.names))
                batch = kept
            table = pa.Table.from_batches([batch])
        table = table.drop_columns([ORDER])
        pack = packing_for(stages)
        if pack is not None:  # as the shard writer packs one partition
            packer = pack.start("00000")  # one partition, of no input: its rows' ids as before
            batches = [rows for b in table.to_batches() for rows, _ in packer.feed(b)]
            batches += [rows for rows, _ in packer.flush()]
            table = pa.Table.from_batches(batches, schema=pack.output_schema())
        rej = (
            pa.concat_tables(rejected).cast(REJECTED_SCHEMA)
            if rejected
            else REJECTED_SCHEMA.empty_table()
        )
        return PipelineResult(table, rej, counts, quarantined)

    def recipe(
        self, inputs: list[str], *, name: str, root: str | Path = "curated", **extra: Any
    ) -> Recipe:
        data: dict[str, Any] = {
            "name": name,
            "inputs": inputs,
            "text_field": self.text_field,
            "stages": self.entries,
        }
        if self.chat is not None:
            data["chat"] = self.chat.model_dump()
        data["output"] = {"root": str(root), **extra.pop("output", {})}
        data.update(extra)
        return Recipe.from_dict(data, source="<pipeline>")

    def run(
        self, inputs: list[str], *, name: str, root: str | Path = "curated", **extra: Any
    ) -> Version:
        """Build (or find) a published version from files on disk, like `curate run`."""
        from curate.runner import run

        return run(self.recipe(inputs, name=name, root=root, **extra))


def _chat_table(
    data: pa.Table | Iterable[Mapping[str, Any]], chat: ChatInput
) -> tuple[pa.Table, pa.Table]:
    """Records as `id` and `messages` (the chat reader's columns), and the quarantined ones.
    Ids are the records' `id` when they have one, else their position."""
    records = data.to_pylist() if isinstance(data, pa.Table) else list(data)
    ids, conversations, bad_ids, reasons = [], [], [], []
    for i, record in enumerate(records):
        given = record.get(ID) if isinstance(record, Mapping) else None
        rid = str(given) if given is not None else str(i)
        found = to_messages(dict(record), chat) if isinstance(record, Mapping) else (
            "line is not a JSON object"
        )  # fmt: skip
        if not isinstance(found, str):  # as the reader: never a crash building the column
            found = lone_surrogate(found) or found
        if isinstance(found, str):
            bad_ids.append(rid)
            reasons.append(found)
            continue
        ids.append(rid)
        conversations.append(found)
    table = pa.table({ID: pa.array(ids, pa.string()), MESSAGES: messages_array(conversations)})
    quarantined = pa.table([pa.array(bad_ids, pa.string()), pa.array(reasons, pa.string())],
                           schema=QUARANTINED)  # fmt: skip
    return table, quarantined

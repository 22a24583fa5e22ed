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

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import xxhash

from curate.cache import keys as cache_keys
from curate.chat.reader import lone_surrogate, messages_array
from curate.chat.shapes import to_messages
from curate.chat.spec import MESSAGES, ChatInput
from curate.collective.local import LocalSummaries
from curate.engines.tasks import ready
from curate.errors import CurateError
from curate.io.batches import ID, ORDER
from curate.output.packing import packing_for
from curate.recipe import Recipe, StageSpec, build_stage, shape_problems
from curate.stages.base import (
    REJECTED_SCHEMA,
    BarrierStage,
    MapStage,
    Stage,
    StageCounts,
    dropping,
    keeping,
)
from curate.stages.chain import build_stages, run_maps
from curate.version import Version

KEPT_BYTES = 2 << 30
"""What `Pipeline.process` keeps of intermediate results at most (Arrow bytes, shared)."""

QUARANTINED = pa.schema([pa.field(ID, pa.string()), pa.field("reason", pa.string())])


@dataclass
class PipelineResult:
    table: pa.Table
    rejected: pa.Table
    counts: dict[str, StageCounts] = field(default_factory=dict)
    quarantined: pa.Table = field(default_factory=lambda: QUARANTINED.empty_table())
    """Chat records that are no conversation (id, reason), as the chat reader quarantines."""
    reused: list[str] = field(default_factory=list)
    """Stages (`position:name`) whose result was kept from an earlier `process` call."""

    def __repr__(self) -> str:
        """The kept rows and, per stage, documents in and out, changed and removed by reason."""
        head = f"PipelineResult: {self.table.num_rows:,} rows, {self.rejected.num_rows:,} removed"
        if self.quarantined.num_rows:
            head += f", {self.quarantined.num_rows:,} quarantined"
        rows = [("stage", "in", "out", "changed", "removed")] + [
            (name, f"{c.docs_in:,}", f"{c.docs_out:,}", f"{c.changed:,}", _removed(c))
            for name, c in self.counts.items()
        ]
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        lines = [
            "  " + "  ".join([r[0].ljust(widths[0]), *(v.rjust(w) for v, w in
                              zip(r[1:4], widths[1:], strict=True)), r[4]]).rstrip()
            for r in rows
        ]  # fmt: skip
        if self.reused:
            lines.append(f"  kept from an earlier process(): {', '.join(self.reused)}")
        return "\n".join([head, *lines])

    def _repr_html_(self) -> str:
        """The same per-stage counts as a table, for notebooks; every value escaped."""
        cells = "".join(
            f"<tr><td>{escape(name)}</td><td>{c.docs_in:,}</td><td>{c.docs_out:,}</td>"
            f"<td>{c.changed:,}</td><td>{escape(_removed(c))}</td>"
            f"<td>{c.seconds:.2f}</td></tr>"
            for name, c in self.counts.items()
        )
        reused = f"; kept from an earlier process(): {escape(', '.join(self.reused))}"
        quarantined = f", {self.quarantined.num_rows:,} quarantined"
        return (
            f"<div><b>PipelineResult</b>: {self.table.num_rows:,} rows, "
            f"{self.rejected.num_rows:,} removed"
            f"{quarantined if self.quarantined.num_rows else ''}"
            f"{reused if self.reused else ''}"
            "<table><thead><tr><th>stage</th><th>in</th><th>out</th><th>changed</th>"
            f"<th>removed</th><th>seconds</th></tr></thead><tbody>{cells}</tbody></table></div>"
        )


def _removed(counts: StageCounts) -> str:
    return ", ".join(f"{reason}: {n:,}" for reason, n in sorted(counts.removed.items()))


class Pipeline:
    """An ordered list of stages, built in code."""

    def __init__(
        self, stages: Iterable[Mapping[str, Any]] = (), *, text_field: str = "text",
        chat: str | Mapping[str, Any] | ChatInput | None = None, keep: bool = True,
    ) -> None:  # fmt: skip
        """`chat`: the records are conversations: a shape name (`messages`, `sharegpt`,
        `alpaca`, `auto`) or the recipe's `chat:` mapping. `keep`: `process` keeps each
        stage's result in memory (for this process, shared by every pipeline, the oldest
        dropped beyond `KEPT_BYTES`), keyed by the data and the stages up to it, so running
        it again after changing a later stage -- even from a new `Pipeline` built in a
        re-run notebook cell -- runs only the stages from that one on."""
        self.keep = keep
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
        stages = [ready(s) for s in self.stages()]  # set up once per process and config
        labels = [f"{i}:{s.name}" for i, s in enumerate(stages)]
        keys = _stage_keys(table, stages, self.text_field, self.chat)
        state, start = _State(table, [], {label: StageCounts() for label in labels}), 0
        for i in reversed(range(len(stages)) if self.keep else ()):
            if keys[i] in _KEPT:
                _KEPT.move_to_end(keys[i])
                state, start = _KEPT[keys[i]].copy(), i + 1
                break
        for i in range(start, len(stages)):
            state = _run_stage(stages[i], state, state.counts[labels[i]])
            self._keep(keys[i], state)
        reused = labels[:start]
        table, rejected, counts = state.table, state.rejected, state.counts
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
        return PipelineResult(table, rej, counts, quarantined, reused)

    def _keep(self, key: str, state: _State) -> None:
        if self.keep:
            _KEPT[key] = state.copy()
            _KEPT.move_to_end(key)
            while len(_KEPT) > 1 and sum(s.nbytes() for s in _KEPT.values()) > KEPT_BYTES:
                _KEPT.popitem(last=False)

    @staticmethod
    def forget() -> None:
        """Drop every intermediate result `process` kept in this process."""
        _KEPT.clear()

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


_KEPT: OrderedDict[str, _State] = OrderedDict()


@dataclass
class _State:
    """The data after some stages of `process`: what is left, what was removed, counts."""

    table: pa.Table
    rejected: list[pa.Table]
    counts: dict[str, StageCounts]

    def nbytes(self) -> int:
        return int(self.table.nbytes + sum(t.nbytes for t in self.rejected))

    def copy(self) -> _State:
        counts = {k: StageCounts.from_dict(c.to_dict()) for k, c in self.counts.items()}
        return _State(self.table, list(self.rejected), counts)


def _stage_keys(
    table: pa.Table, stages: list[Stage], text_field: str, chat: ChatInput | None
) -> list[str]:
    """Per stage, a key of the data `process` was given and every stage up to that one
    (the stage cache's identities: parameters, software, code)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    digest = xxhash.xxh3_128_hexdigest(sink.getvalue().to_pybytes())
    chat_key = chat.model_dump(mode="json") if chat is not None else None
    key = cache_keys.chain("pipeline", digest, text_field, chat_key)
    out = []
    for stage in stages:
        identity = cache_keys.stage_identity(stage)
        key = cache_keys.after_stage(key, identity)
        out.append(key)
    return out


def _run_stage(stage: Stage, state: _State, counts: StageCounts) -> _State:
    """One stage over the whole table, as the engines run it on one partition."""
    table, rejected = state.table, list(state.rejected)
    if not table.num_rows:
        return _State(table, rejected, state.counts)
    batch = table.combine_chunks().to_batches()[0]
    if isinstance(stage, MapStage):
        batch = run_maps(batch, [stage], [counts], rejected)
    elif isinstance(stage, BarrierStage):
        decision = stage.decide(LocalSummaries.from_tables([stage.summarize(batch)]))
        decision = decision.collect(stage.decision_schema()).sort_by(ORDER)
        changes = None
        if stage.changes_rows():
            fields = [ID, *(f.name for f in stage.decision_fields)]
            changes, decision = keeping(decision).select(fields), dropping(decision)
        applied = stage.apply(batch, decision.column(ID), changes)
        kept = applied.batch
        counts.docs_in, counts.docs_out = batch.num_rows, kept.num_rows
        counts.changed = applied.changed
        counts.counters.update(applied.counters or {})
        counts.observe(stage, batch, applied)
        counts.removed.update(decision.column("reason").to_pylist())
        rejected.append(decision.select(REJECTED_SCHEMA.names))
        batch = kept
    return _State(pa.Table.from_batches([batch]), rejected, state.counts)


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

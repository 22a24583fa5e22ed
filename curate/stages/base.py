"""The two stage contracts every engine runs: map stages and barrier stages.

A map stage is a pure function of one record batch, so any engine may run it in
any worker. A barrier stage must see every document before deciding; it splits
into `summarize` (per batch, in the same pass as the map stages before it),
`decide` (global, written against the engine's collective operations) and
`apply` (per batch, joining the decision on the stable document id).

Subclasses write one method: `process` for a map stage, `keep` for a filter,
`summarize` and `decide` for a barrier. The base classes do the dropping and the
counting once, so every stage reports the same counters the same way.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate.chat.contents import Units, joined, units
from curate.chat.spec import MESSAGES
from curate.io.batches import ID, ORDER  # ORDER is also a barrier's name, imported from here
from curate.stage_params import StageParams
from curate.stats.container import Stats
from curate.stats.measure import measure

if TYPE_CHECKING:
    from curate.collective.frame import Frame, Summaries
    from curate.output.packing import PackSpec

REJECTED_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string()),
        pa.field("stage", pa.string()),
        pa.field("reason", pa.string()),
        pa.field("duplicate_of", pa.string()),
        pa.field("similarity", pa.float32()),
    ]
)

DECISION_SCHEMA = pa.schema([*REJECTED_SCHEMA, pa.field(ORDER, pa.uint64())])
"""A barrier's decision: the rejected rows, and each removed document's `_order`; a barrier
whose `apply` changes the documents it keeps adds its `decision_fields` (see `BarrierStage`)."""


def dropping(decision: pa.Table) -> pa.Table:
    """The rows of a decision that drop their document (they have a reason): what is
    counted as removed and written to rejected/."""
    if decision.num_rows == 0 or decision.column("reason").null_count == 0:
        return decision
    return decision.filter(pc.is_valid(decision.column("reason")))


def keeping(decision: pa.Table) -> pa.Table:
    """The rows of a decision that name a document kept and changed (no reason): what a
    barrier with `decision_fields` tells its `apply` about the documents it keeps."""
    if decision.num_rows == 0 or decision.column("reason").null_count == 0:
        return decision.slice(0, 0)
    return decision.filter(pc.is_null(decision.column("reason")))


STATISTICS = "statistics"
"""The key of what `decide_with_stats` learned that is a barrier's statistics
(`curate.stats.Stats.to_dict()`): it goes to the version's statistics.json, not the manifest."""


@dataclass(frozen=True)
class StageContext:
    """What a stage may know about the run it is part of."""

    text_field: str = "text"
    position: int = 0
    base_dir: str = "."  # the recipe's folder: a stage's relative paths (a tokenizer) start here
    chat: bool = False
    """The records are conversations (a `messages` column in place of text): text stages
    work on the contents of the messages of their `roles` (see `curate.chat.contents`)."""
    stats: bool = True
    """Collect statistics (recipe `output.stats`): the generic figures the engine measures
    and a stage's own `StageResult.stats`. Part of the stage's cache key, so an entry kept
    without statistics never serves a run that publishes them."""
    examples: int = 0
    """Removed documents kept as examples per reason (recipe `output.examples`; 0: none):
    the engine attaches their text to the removed rows (`curate.stages.examples`). Part
    of the cache key too: an entry kept without them never serves a run that shows them."""


@dataclass
class StageResult:
    """A processed batch, how many rows changed, and the rows removed with their reasons."""

    batch: pa.RecordBatch
    changed: int = 0
    removed: pa.Table | None = None
    counters: dict[str, int] | None = None
    """Stage-specific tallies (documents per language, per benchmark), summed by the engine."""
    stats: Stats | None = None
    """Stage-specific statistics for this batch (`curate.stats`: integer sums, fixed-bin
    histograms), merged by the engine into the stage's; only when `context.stats`."""
    examples: pa.Table | None = None
    """Documents the stage changed, offered as examples of the change (pii: the values it
    found, shown as their types), made by `curate.stages.examples.offer`; only when
    `context.examples`."""


@dataclass
class StageCounts:
    """Counters every stage reports: documents in and out, changed, and removed by reason."""

    docs_in: int = 0
    docs_out: int = 0
    changed: int = 0
    removed: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    counters: Counter[str] = field(default_factory=Counter)
    stats: Stats = field(default_factory=Stats)
    """What the stage did in figures (`curate.stats`): kept with the counts wherever they
    go (partition records, checkpoints, stage cache entries), so a replay publishes them."""

    def observe(self, stage: Stage, before: pa.RecordBatch, result: StageResult) -> None:
        """Add one call of `stage` (batch `before` in, `result` out) to the statistics: the
        generic figures (`curate.stats.measure`) and the stage's own."""
        if not stage.context.stats:
            return
        measure(self.stats, before, result.batch, text_field=stage.text_field,
                chat=stage.context.chat, changed=result.changed)  # fmt: skip
        if result.stats:
            self.stats.add(result.stats)

    def add(self, other: StageCounts) -> None:
        self.docs_in += other.docs_in
        self.docs_out += other.docs_out
        self.changed += other.changed
        self.removed.update(other.removed)
        self.seconds += other.seconds
        self.counters.update(other.counters)
        self.stats.add(other.stats)

    def subtract(self, other: StageCounts) -> None:
        """Take out what `other` counted (documents a rerun does not hold again, whose
        counts an earlier run's cache entry included: `curate.cache.by_document`). Seconds
        stay: they are this run's."""
        self.docs_in -= other.docs_in
        self.docs_out -= other.docs_out
        self.changed -= other.changed
        self.removed.subtract(other.removed)
        self.counters.subtract(other.counters)
        self.stats.subtract(other.stats)

    def to_dict(self) -> dict[str, Any]:
        """Reasons and counters that are 0 are left out, so the counts of a set of documents
        read the same however they were added up (`subtract` included)."""
        out = {
            "docs_in": self.docs_in,
            "docs_out": self.docs_out,
            "changed": self.changed,
            "removed": {k: v for k, v in sorted(self.removed.items()) if v},
            "seconds": round(self.seconds, 4),
        }
        counters = {k: v for k, v in sorted(self.counters.items()) if v}
        if counters:
            out["counters"] = counters
        if self.stats:
            out["stats"] = self.stats.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StageCounts:
        return cls(
            docs_in=data["docs_in"],
            docs_out=data["docs_out"],
            changed=data["changed"],
            removed=Counter(data["removed"]),
            seconds=data.get("seconds", 0.0),
            counters=Counter(data.get("counters", {})),
            stats=Stats.from_dict(data.get("stats")),
        )


def rejected_table(
    stage: str,
    ids: pa.Array | list[str],
    reasons: pa.Array | list[str],
    duplicate_of: pa.Array | list[str | None] | None = None,
    similarity: pa.Array | list[float | None] | None = None,
) -> pa.Table:
    """The `rejected/` side output rows for removed documents (ids and reasons, never text)."""
    n = len(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.string()),
            "stage": pa.array([stage] * n, pa.string()),
            "reason": pa.array(reasons, pa.string()),
            "duplicate_of": pa.array(
                duplicate_of if duplicate_of is not None else [None] * n, pa.string()
            ),
            "similarity": pa.array(
                similarity if similarity is not None else [None] * n, pa.float32()
            ),
        },
        schema=REJECTED_SCHEMA,
    )


P = TypeVar("P", bound=StageParams)
"""A stage's parameter model: `self.params` is typed as the stage's own `Params`."""


class Stage(ABC, Generic[P]):
    """What every stage declares: its name, parameters, the columns it reads and writes.

    A built-in stage names its parameter model twice, `class Tokenize(MapStage[TokenizeParams])`
    for the type checker and `Params = TokenizeParams` for the recipe (a class variable
    cannot be generic); a user's `class Mine(MapStage)` keeps working untyped.
    """

    name: ClassVar[str]
    Params: ClassVar[type[StageParams]]
    reads: ClassVar[tuple[str, ...]] = ("text",)
    """Columns the stage reads ("text": the text field, or `messages` on chat records).
    What it writes and removes is said by `output_schema`, the one declaration that follows
    its parameters (tokenize's keep_text, chat_template's mask, packing) and that gives the
    shards their schema; the plan's column check folds it over the recipe."""
    shapes: ClassVar[tuple[str, ...]] = ("text",)
    """Record shapes the stage works on, "text" and/or "chat", checked against the recipe;
    unless a stage says, it works on chat records when it reads `messages`, else on text."""
    default_roles: ClassVar[tuple[str, ...] | None] = None
    """Chat records: the roles worked on when the recipe names none (None: all)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "shapes" not in cls.__dict__ and "reads" in cls.__dict__:
            cls.shapes = ("chat",) if MESSAGES in cls.reads else ("text",)

    def __init__(self, params: P, context: StageContext | None = None) -> None:
        self.params: P = params
        self.context = context or StageContext()

    @property
    def text_field(self) -> str:
        return self.context.text_field

    def columns_read(self) -> tuple[str, ...]:
        text = MESSAGES if self.context.chat else self.text_field
        return tuple(text if c == "text" else c for c in self.reads)

    @property
    def chat_roles(self) -> tuple[str, ...] | None:
        """Chat records: the roles whose contents this stage works on (None: all)."""
        chosen = getattr(self.params, "roles", None)
        return tuple(chosen) if chosen is not None else self.default_roles

    def text_units(self, batch: pa.RecordBatch) -> Units:
        """The strings this stage works on: the text column, or the chosen message contents."""
        return units(batch, self.text_field, self.context.chat, self.chat_roles)

    def document_texts(self, batch: pa.RecordBatch) -> pa.Array:
        """One string per row to judge a document by: its text, or (chat) its chosen
        messages' contents joined by a blank line."""
        return joined(self.text_units(batch))

    def setup(self) -> None:
        """Build heavy objects once per worker (a tokenizer, an analyzer). Default: nothing."""
        return None

    def learnt(self) -> Any:
        """What this stage's memos gained since it last said, for sibling workers running the
        same stage to take in (`learn`) instead of computing it again: only entries whose
        values depend on their keys alone, so no output can change (the pii stage's phone
        verdicts). Both engines pass them between workers (`curate.engines.memo_exchange`;
        Ray's as task results). Picklable; None (the default): nothing to tell. A stage set
        up in a worker after news arrived there misses those news (only a memo stays colder)."""
        return None

    def learn(self, learnt: Any) -> None:
        """Take in what the same stage in a sibling worker told (`learnt`). Default: nothing."""
        return None

    def software(self) -> dict[str, str]:
        """Versions of what this stage's output depends on; they enter the fingerprint."""
        return {}

    def describe(self) -> dict[str, Any]:
        """What the manifest records about this stage beyond its parameters."""
        return {}

    def output_schema(self, schema: pa.Schema) -> pa.Schema:
        """The schema of batches this stage returns, given its input schema (default: unchanged).

        Engines fold this over the plan before any data moves, so every shard of a version
        gets one schema even when a partition ends up empty.
        """
        return schema

    def pack_spec(self) -> PackSpec | None:
        """How the shard writer packs this stage's rows (tokenize, chat_template with `pack`);
        only a recipe's last stage may ask. Default: no packing."""
        return None

    def __getstate__(self) -> dict[str, Any]:
        # Heavy objects built in setup() are named with a leading underscore and never shipped.
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}


class MapStage(Stage[P]):
    """A pure function of one batch."""

    @abstractmethod
    def process(self, batch: pa.RecordBatch) -> StageResult: ...

    def explain(self, batch: pa.RecordBatch) -> list[tuple[str, np.ndarray]] | None:
        """For a stage of several rules (quality_filter): each rule and the rows it fails,
        every rule on every row, so `inspect-filter` can say what a rule removes alone.
        Default None: the stage's reasons are the ones `process` gives."""
        return None


class FilterStage(MapStage[P]):
    """A map stage that only decides: the subclass says which rows to keep and why not."""

    @abstractmethod
    def keep(self, batch: pa.RecordBatch) -> tuple[np.ndarray, list[str | None] | np.ndarray]:
        """A boolean keep mask, and for each row a reason (used only where the mask is False)."""

    def keep_with_stats(
        self, batch: pa.RecordBatch
    ) -> tuple[np.ndarray, list[str | None] | np.ndarray, Stats | None]:
        """`keep`, and the statistics of judging (each rule's measured values): a filter
        that has some writes this instead. Default: `keep`, no statistics of its own."""
        mask, reasons = self.keep(batch)
        return mask, reasons, None

    def process(self, batch: pa.RecordBatch) -> StageResult:
        mask, reasons, stats = self.keep_with_stats(batch)
        mask = np.asarray(mask, dtype=bool)
        if mask.all():
            return StageResult(batch, stats=stats)
        dropped = np.flatnonzero(~mask)
        ids = pc.take(batch.column(ID), pa.array(dropped))
        why = [reasons[i] or self.name for i in dropped]
        return StageResult(
            batch.filter(pa.array(mask)), removed=rejected_table(self.name, ids, why), stats=stats
        )


class BarrierStage(Stage[P]):
    """A stage that must see every document before it can decide which to drop.

    Most barriers only drop (exact and MinHash dedup). One whose `apply` also changes the
    documents it keeps (line_dedup removes their repeated lines) or adds a column to them
    (a percentile bucket per document) declares `decision_fields`: its decision then also
    holds a row, with no reason, for each kept document it changes, carrying those fields,
    and `apply` gets those rows of its partition as `changes`. The rows travel, are cached
    and replayed exactly as the drops do (one decision file per partition).
    """

    decision_fields: tuple[pa.Field, ...] = ()
    """Columns of the decision beyond `DECISION_SCHEMA`, for an `apply` that changes the
    documents it keeps or adds a column (its `output_schema` says which); none: it only drops.
    A class attribute, or set per instance where a parameter decides (minhash_dedup's
    `cluster_size`): a barrier that only drops under its parameters must say none."""

    def decision_schema(self) -> pa.Schema:
        """The schema of this barrier's decision rows (and of its decision files)."""
        return pa.schema([*DECISION_SCHEMA, *self.decision_fields])

    def changes_rows(self) -> bool:
        """Whether `apply` changes the rows it keeps (so they depend on the decision, not
        only on the document): true of a barrier with `decision_fields`."""
        return bool(self.decision_fields)

    @abstractmethod
    def summarize(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """A compact keyed table for this batch; it must carry the `id` and `_order` columns."""

    @abstractmethod
    def decide(self, summaries: Summaries) -> Frame:
        """The global step: the documents to drop, as `DECISION_SCHEMA` rows, in a frame the
        engine holds (it writes each partition's part where the part is)."""

    # -- what the stage cache keeps (curate.cache): the part of a summary worth keeping --
    def summary_basis(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The costly part of `summarize`, kept by the stage cache per partition; it must
        carry `id` and `_order`. The default is the whole summary. A barrier whose summary
        holds values derived cheaply from a costlier basis under parameters that users tune
        (MinHash band keys from signatures, under the threshold) returns the basis here and
        derives the rest in `summary_from_basis`, so a change of those parameters recomputes
        only the cheap part."""
        return self.summarize(batch)

    def summary_from_basis(self, basis: pa.RecordBatch) -> pa.RecordBatch:
        """The summary `summarize` would return, from `summary_basis`'s result."""
        return basis

    def basis_params(self) -> dict[str, Any]:
        """The parameters `summary_basis` depends on (its cache key); default: all of them."""
        return dict(self.params.model_dump(mode="json"))

    def decide_with_stats(self, summaries: Summaries) -> tuple[Frame, dict[str, Any]]:
        """The decision and what making it learned (pairs, clusters, seconds): what engines
        call, so those statistics reach the manifest with the decision rather than through
        the stage's own state; under the key `STATISTICS`, the figures for the version's
        statistics.json (only when `context.stats`). The default wraps `decide` and learns
        nothing beyond it."""
        return self.decide(summaries), {}

    def apply(
        self, batch: pa.RecordBatch, drop_ids: pa.Array, changes: pa.Table | None = None
    ) -> StageResult:
        """Drop the rows the decision names, joining on the stable id, never on position.

        `changes`: a barrier with `decision_fields` gets its decision's rows for the kept
        documents of this partition (`keeping`: `id` and those fields; None or empty when
        there are none) and overrides this to change those documents as well, joining them
        on `id` too; its `StageResult` counts them (`changed`, `counters`, `stats`)."""
        if len(drop_ids) == 0 or batch.num_rows == 0:
            return StageResult(batch)
        hit = pc.is_in(batch.column(ID), value_set=drop_ids)
        return StageResult(batch.filter(pc.invert(hit)))

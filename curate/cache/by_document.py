"""A pass after a changed decision reuses its map stages' work document by document.

An earlier barrier's decision for a partition changes whenever a new file brings a copy
of one of its documents: a file inserted before the others changes every old partition's
exact_dedup decision. The pass after it then starts from another input key, so none of
its entries match, and its map stages (pii, tokenize: most of a build) ran again on every
old partition, although each old document's text, and so what each stage does to it, is
the same. When every stage on the way works document by document (`keys.per_document`),
the entries kept under the old decision hold each document's outcome, found through the
pass's map family (`keys.map_family`, an alias naming the entries of every map stage):

- a document the entries hold takes its row after the last stage (or its removal by a
  stage, with the reason) from them; only documents they do not hold are computed (`A`,
  those the old decision had dropped and the new one keeps);
- counts and statistics are sums over documents (`StageCounts`, `Stats`: counters that
  are 0 are never listed, so any way of adding them up reads the same): the pass starts
  from the entries' totals, adds what it computed, and takes out the documents the
  entries counted that this pass does not hold (`R`: dropped by the new decision). Those
  are run through the stages again to learn what they counted, which costs a stage's
  setup and their share of the work; their input rows are the staged rows before any
  decision dropped them (`staged_rows.unfiltered_rows`);
- examples are chosen per stage call (`curate.stages.examples`: the smallest id hashes
  per reason), so each chunk's choice is made again over the documents it holds: a
  document chosen now whose text the entries do not hold (it was not chosen then, and a
  document of `R` had been) makes the chunk be computed whole, its old documents counted
  out like `R`'s. A pii stage's offered changes keep a row per value type found, chosen
  or not (`offer`), so the choice can be made again.

The result is what a run without the cache computes, byte for byte: the rows of each
chunk in their order, the removed rows and examples of each stage in each chunk, the
counts. A pass running this way keeps no entries of its own (the family entries still
serve the next run) and starts over when interrupted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate.cache import keys
from curate.cache.names import KEY
from curate.cache.replay import checked, entry_batches
from curate.cache.store import Entry, StageCache
from curate.io.batches import ID, ORDER, ORDER_SHIFT, with_partition
from curate.stages.base import REJECTED_SCHEMA, MapStage, StageCounts
from curate.stages.examples import COLUMN as EXAMPLE
from curate.stages.examples import NOT_SHOWN, id_hash, smallest, with_examples

log = logging.getLogger(__name__)

_LOCAL = np.uint64((1 << ORDER_SHIFT) - 1)

StageRun = tuple[pa.RecordBatch, list[list[pa.Table]], list[StageCounts]]
"""What computing a batch gives: its rows after the pass's stages, each stage's removed and
offered tables (in the order `run_maps` appends them), and each stage's counts."""

Compute = Callable[[pa.RecordBatch], StageRun]


@dataclass
class _Stage:
    """One map stage's entry, indexed by document."""

    survivors: set[str]  # ids of the rows it left
    removed: pa.Table  # the rows it removed (REJECTED_SCHEMA, with `example` when kept)
    removed_at: dict[str, int]  # id -> row of `removed`
    offered: pa.Table | None  # the rows it offered as examples of a change
    offered_at: dict[str, list[int]]  # id -> rows of `offered`, in order
    counts: StageCounts  # over every chunk of the entry


@dataclass
class ByDocument:
    """The entries of a pass's map stages kept under another decision, by document."""

    entries: list[Entry]
    stages: list[_Stage]
    rows: pa.Table  # the last stage's rows (`_order` partition-local)
    row_of: dict[int, int]  # local `_order` -> row of `rows`
    entered: set[str]  # ids of the documents the first stage was given
    reused: set[str] = field(default_factory=set)
    computed: int = 0
    texts_computed: int = 0
    fallback_chunks: int = 0

    def old_counts(self) -> list[StageCounts]:
        """What the entries counted, per stage: the pass's counts start from these."""
        return [s.counts for s in self.stages]

    def process(
        self, batch: pa.RecordBatch, maps: list[MapStage], compute: Compute
    ) -> tuple[pa.RecordBatch, list[pa.Table], list[StageCounts]] | None:
        """One chunk (`batch`, the pass's input after the decision): its rows after the
        stages, the removed and offered tables in the order a run appends them, and the
        counts of the documents computed; None when the chunk must be computed whole."""
        ids = batch.column(ID).cast(pa.string()).to_pylist()
        local = _locals(batch.column(ORDER))
        final = np.full(len(ids), -1, dtype=np.int64)
        gone_at = np.full(len(ids), -1, dtype=np.int64)
        new = np.zeros(len(ids), dtype=bool)
        for r, doc in enumerate(ids):
            if doc not in self.entered:
                new[r] = True
                continue
            for i, kept in enumerate(self.stages):
                if doc in kept.removed_at:
                    gone_at[r] = i
                    break
                if doc not in kept.survivors:
                    new[r] = True  # not where the entries say it went: computed
                    break
            else:
                at = self.row_of.get(int(local[r]), -1)
                if at < 0 or self.rows.column(ID)[at].as_py() != doc:
                    new[r] = True
                else:
                    final[r] = at
        computed: StageRun | None = None
        if new.any():
            computed = compute(batch.filter(pa.array(new)))
        position = {doc: r for r, doc in enumerate(ids)}
        calls: list[list[tuple[pa.Table, bool]]] = []
        for i, state in enumerate(self.stages):
            mine = [t for t in computed[1][i]] if computed is not None else []
            called = _reached(i, gone_at, new, final)
            calls.append(_call_tables(state, i, ids, gone_at, called, position, mine))
        texts = self._texts(batch, maps, calls, compute)
        tables: list[pa.Table] = []
        for stage, made in zip(maps, calls, strict=True):
            for table, offered in made:
                if stage.context.examples and EXAMPLE in table.column_names:
                    chosen = _choose(table, stage.context.examples, offered, texts)
                    if chosen is None:
                        return None
                    table = chosen
                tables.append(table)
        out = self._rows(batch, final, computed)
        if out is None:
            return None
        self.reused.update(doc for r, doc in enumerate(ids) if not new[r])
        self.computed += int(new.sum())
        return out, tables, computed[2] if computed is not None else []

    def _texts(
        self,
        batch: pa.RecordBatch,
        maps: list[MapStage],
        calls: list[list[tuple[pa.Table, bool]]],
        compute: Compute,
    ) -> dict[tuple[int, str, str], dict[str, Any]]:
        """The example values a chunk's new choice needs and the entries do not hold
        (documents chosen now, not then): the documents computed again, alone, for them
        (what they counted is not kept: the entries' counts hold them already)."""
        wanted: set[str] = set()
        for stage, made in zip(maps, calls, strict=True):
            for table, offered in made:
                if stage.context.examples and EXAMPLE in table.column_names:
                    wanted |= _lacking(table, stage.context.examples, offered)
        if not wanted:
            return {}
        ids = batch.column(ID).cast(pa.string())
        _, tables, _ = compute(batch.filter(pc.is_in(ids, value_set=pa.array(sorted(wanted)))))
        self.texts_computed += len(wanted)
        found: dict[tuple[int, str, str], dict[str, Any]] = {}
        for per_stage in tables:
            for part in per_stage:
                if EXAMPLE not in part.column_names:
                    continue
                for doc, reason, value in zip(
                    part.column(ID).to_pylist(), part.column("reason").to_pylist(),
                    part.column(EXAMPLE).to_pylist(), strict=True,
                ):  # fmt: skip
                    if _has_text(value):
                        found[(value["position"], doc, reason)] = value
        return found

    def _rows(
        self, batch: pa.RecordBatch, final: np.ndarray, computed: StageRun | None
    ) -> pa.RecordBatch | None:
        """The chunk's rows after the last stage: the kept ones and the computed ones, in
        `_order` (the order a run gives them)."""
        have = final[final >= 0]
        kept = self.rows.take(pa.array(have)) if len(have) else self.rows.slice(0, 0)
        parts = [kept]
        if computed is not None and computed[0].num_rows:
            made = pa.Table.from_batches([computed[0]])
            index = batch.schema.get_field_index(ORDER)
            made = made.set_column(
                made.schema.get_field_index(ORDER), ORDER,
                pa.array(_locals(made.column(ORDER)), batch.schema.field(index).type),
            )  # fmt: skip
            if made.schema != kept.schema:
                log.warning("stage cache entry %s holds rows of another shape: not used",
                            self.entries[-1].key)  # fmt: skip
                return None
            parts.append(made)
        rows = pa.concat_tables(parts).combine_chunks()
        rows = rows.take(pc.sort_indices(rows, [(ORDER, "ascending")]))
        index = _partition_of(batch)
        batches = rows.combine_chunks().to_batches()
        out = batches[0] if batches else pa.RecordBatch.from_pylist([], schema=rows.schema)
        return with_partition(out, index)

    def recount(self, rows: Iterable[pa.RecordBatch], compute: Compute) -> list[StageCounts]:
        """The counts, per stage, of the documents the entries counted and this pass did
        not reuse, run again from their input `rows` (every batch holding any)."""
        wanted = self.entered - self.reused
        total: list[StageCounts] | None = None
        found = 0
        for batch in rows:
            if not wanted:
                break
            mask = pc.is_in(batch.column(ID).cast(pa.string()), value_set=pa.array(sorted(wanted)))
            part = batch.filter(mask)
            if part.num_rows == 0:
                continue
            found += part.num_rows
            counts = compute(part)[2]
            if total is None:
                total = counts
            else:
                for mine, other in zip(total, counts, strict=True):
                    mine.add(other)
        if found != len(wanted):
            raise RuntimeError(
                f"stage cache: {len(wanted) - found} documents counted by entry "
                f"{self.entries[0].key} were not found again"
            )
        return total or []

    def report(self) -> dict[str, int]:
        return {
            "reused": len(self.reused),
            "computed": self.computed,
            "recounted": len(self.entered - self.reused),
            "chunks_computed_whole": self.fallback_chunks,
            "texts_computed": self.texts_computed,
        }


def _reached(i: int, gone_at: np.ndarray, new: np.ndarray, final: np.ndarray) -> np.ndarray:
    """Rows (of the old documents) that stage i was given: not removed before it."""
    return (~new) & ((gone_at < 0) | (gone_at >= i))


def _call_tables(
    state: _Stage,
    i: int,
    ids: list[str],
    gone_at: np.ndarray,
    called: np.ndarray,
    position: dict[str, int],
    computed: list[pa.Table],
) -> list[tuple[pa.Table, bool]]:
    """Stage i's removed and offered tables for the chunk (each with whether it is the
    offered one), as one call over its documents makes them, examples not yet chosen: the
    old documents' rows from the entry and the computed documents' rows, in the chunk's
    row order."""
    removed_rows = [state.removed_at[ids[r]] for r in np.flatnonzero(gone_at == i)]
    offered_rows = [
        n for r in np.flatnonzero(called) if (rows := state.offered_at.get(ids[r])) for n in rows
    ]
    new_removed = [t for t in computed if not _offered_table(t)]
    new_offered = [t for t in computed if _offered_table(t)]
    out = []
    removed = _merged(state.removed, removed_rows, new_removed, position)
    if removed is not None:
        out.append((removed, False))
    if state.offered is not None or new_offered:
        base = state.offered if state.offered is not None else new_offered[0].slice(0, 0)
        offered = _merged(base, offered_rows, new_offered, position)
        if offered is not None:
            out.append((offered, True))
    return out


def _position_of(table: pa.Table) -> int:
    """The stage position its rows' examples name (every row of one stage's table)."""
    for value in table.column(EXAMPLE).to_pylist():
        if value is not None:
            return int(value["position"])
    return -1


def _offered_table(table: pa.Table) -> bool:
    if EXAMPLE not in table.column_names or table.num_rows == 0:
        return False
    removed = pc.struct_field(table.column(EXAMPLE), "removed")
    return bool(pc.all(pc.invert(pc.fill_null(removed, True))).as_py())


def _merged(
    old: pa.Table, rows: list[int], computed: list[pa.Table], position: dict[str, int]
) -> pa.Table | None:
    """The entry's `rows` of `old` and the computed tables, in the chunk's row order (a
    document's own rows keep theirs); None when there are none."""
    parts = [old.take(pa.array(rows, pa.int64()))] if rows else []
    parts += [t.select(old.column_names).cast(old.schema) for t in computed if t.num_rows]
    if not parts:
        return None
    table = pa.concat_tables(parts).combine_chunks()
    where = np.array([position[d] for d in table.column(ID).to_pylist()], dtype=np.int64)
    order = np.lexsort((np.arange(len(where)), where))
    return table.take(pa.array(order))


def _chosen(table: pa.Table, k: int) -> set[int]:
    """Rows of `table` a stage call chooses as examples: the k smallest id hashes per reason."""
    ids = table.column(ID).to_pylist()
    reasons = table.column("reason").to_pylist()
    return set(smallest([(r, id_hash(d), d) for r, d in zip(reasons, ids, strict=True)], k))


def _has_text(value: dict[str, Any] | None) -> bool:
    return value is not None and value["characters"] != NOT_SHOWN


def _lacking(table: pa.Table, k: int, offered: bool) -> set[str]:
    """Ids of the rows chosen now that hold no example text."""
    values = table.column(EXAMPLE).to_pylist()
    ids = table.column(ID).to_pylist()
    return {ids[n] for n in _chosen(table, k) if not _has_text(values[n])}


def _choose(
    table: pa.Table, k: int, offered: bool, texts: dict[tuple[int, str, str], dict[str, Any]]
) -> pa.Table | None:
    """The table with its examples chosen again over its rows (the k smallest id hashes
    per reason keep their text, from the row or from `texts`, the others none); None when
    a chosen row's text is nowhere."""
    ids = table.column(ID).to_pylist()
    reasons = table.column("reason").to_pylist()
    chosen = _chosen(table, k)
    values = table.column(EXAMPLE).to_pylist()
    position = _position_of(table)
    out = []
    for n, value in enumerate(values):
        if n in chosen:
            if not _has_text(value):
                value = texts.get((position, ids[n], reasons[n]))
                if value is None:
                    return None
            out.append(value)
        elif offered:
            out.append({"position": position, "text": None, "characters": NOT_SHOWN,
                        "removed": False})  # fmt: skip
        else:
            out.append(None)
    column = pa.array(out, table.schema.field(EXAMPLE).type)
    return table.set_column(table.schema.get_field_index(EXAMPLE), EXAMPLE, column)


def load(cache: StageCache, family_key: str, maps: int) -> ByDocument | None:
    """The entries the map family alias leads to, checked and indexed, or None."""
    alias = cache.get(family_key)
    if alias is None or alias.meta.get("kind") != "map-family":
        return None
    targets = alias.meta.get("target")
    if not isinstance(targets, list) or len(targets) != maps:
        return None
    if not all(isinstance(t, str) and KEY.fullmatch(t) for t in targets):
        return None
    entries = []
    for key in targets:
        entry = checked(cache, cache.get(key))
        if entry is None or entry.meta.get("kind") != "map":
            return None
        entries.append(entry)
    if len({e.meta.get("chunks") for e in entries}) != 1:
        return None
    try:
        stages = [_stage(cache, e) for e in entries]
        last = list(entry_batches(cache, entries[-1], "rows.arrow"))
    except (OSError, pa.ArrowException, KeyError, TypeError, ValueError):
        return None
    if last:
        rows = pa.Table.from_batches(last)
    else:
        return None  # nothing left after the stages: nothing worth taking
    row_of = {int(o): n for n, o in enumerate(_locals(rows.column(ORDER)))}
    entered = stages[0].survivors | set(stages[0].removed_at)
    if len(row_of) != rows.num_rows:
        return None
    return ByDocument(entries, stages, rows, row_of, entered)


def _ids(cache: StageCache, entry: Entry) -> set[str]:
    out: set[str] = set()
    for batch in entry_batches(cache, entry, "rows.arrow"):
        out.update(batch.column(ID).cast(pa.string()).to_pylist())
    return out


def _stage(cache: StageCache, entry: Entry) -> _Stage:
    survivors = _ids(cache, entry)
    parts = list(entry_batches(cache, entry, "rejected.arrow"))
    schema = REJECTED_SCHEMA
    if parts and EXAMPLE in parts[0].schema.names:
        schema = with_examples(REJECTED_SCHEMA)
    table = pa.Table.from_batches(parts, schema=schema) if parts else schema.empty_table()
    offered_mask = np.zeros(table.num_rows, dtype=bool)
    if EXAMPLE in table.column_names and table.num_rows:
        flag = pc.struct_field(table.column(EXAMPLE).combine_chunks(), "removed")
        offered_mask = ~np.asarray(pc.fill_null(flag, True), dtype=bool)
    removed = table.filter(pa.array(~offered_mask))
    offered = table.filter(pa.array(offered_mask)) if offered_mask.any() else None
    removed_at = {d: n for n, d in enumerate(removed.column(ID).to_pylist())}
    if len(removed_at) != removed.num_rows:
        raise ValueError("a document removed twice")
    offered_at: dict[str, list[int]] = {}
    if offered is not None:
        for n, d in enumerate(offered.column(ID).to_pylist()):
            offered_at.setdefault(d, []).append(n)
    counts = StageCounts()
    for c in entry.meta["counts"]:
        if c is not None:
            counts.add(StageCounts.from_dict(c))
    counts.seconds = 0.0
    return _Stage(survivors, removed, removed_at, offered, offered_at, counts)


def _locals(orders: pa.Array | pa.ChunkedArray) -> np.ndarray:
    if isinstance(orders, pa.ChunkedArray):
        orders = orders.combine_chunks()
    return orders.to_numpy(zero_copy_only=False).astype(np.uint64) & _LOCAL


def _partition_of(batch: pa.RecordBatch) -> int:
    orders = batch.column(ORDER).to_numpy(zero_copy_only=False).astype(np.uint64)
    return int(orders[0] >> np.uint64(ORDER_SHIFT)) if len(orders) else 0


__all__ = ["ByDocument", "keys", "load"]

"""The stage cache's part in one partition's pass: what to reuse, and what to keep.

A pass runs a partition's chunks (pass 0: batches read from the input; later passes: the
batches staged by the pass before) through the segment's map stages, then summarizes for
the barrier or writes shards. With the cache, each map stage's output is kept per
partition (an entry, `curate.cache.store`), and so is the barrier's summary basis; a
later run reuses the longest prefix of the pass whose entries exist and runs the rest.

Entries are kept **chunk by chunk**: the rows after a stage, the rows it removed and its
counts are recorded per source chunk, so a replay hands the stages after the reused prefix
exactly the batches a run without the cache would have, the rejected rows come out in the
same order, and checkpoints (which flush side outputs and close shards) fall on the same
chunks. The version is byte-identical with or without the cache, and a partition
interrupted while replaying resumes as any other.

Entry files (each an Arrow IPC file) and meta:
- input (key: the pass's input key): `quarantine.arrow` (pass 0: one batch per chunk of
  what could not be read); meta `read` (documents read per chunk, pass 0) and `prev`
  (pass k > 0: the previous barrier's per-chunk counts as it dropped its decision).
- map stage (key: after that stage): `rows.arrow` (the chunks the stage left rows in,
  `_order` partition-local), `rejected.arrow` (the batches of what it removed); meta
  `rows` (rows per chunk; 0: none, the stages after it were not called),
  `rejected` (batches per chunk), `counts` (per chunk, or None when not called).
- barrier basis (key: after the rows it saw): `basis.arrow`; meta `rows` per chunk (-1:
  not called), `family` (its family key, when it has one).
- family alias (key: a basis's family key, `keys.basis_family`): no file; meta `target`,
  the key of the basis entry it leads to.

A basis whose key misses (an earlier barrier's decision for the partition changed: a file
inserted before the others changes every old partition's exact_dedup decision) is made
from the basis its family alias leads to, when there is one: that entry is checked like any
other (sizes and xxh3_128, its meta's `family` the key looked up, one row per id), its rows
taken by document id for the documents the pass holds, and only the others computed
(`Reuse.summary_basis`); the pass keeps the result under its own key as usual, unless no
document was computed (the family entry holds every row: kept once, found the same way
next time). The family
key covers the partition's content and every stage before the barrier, so a document
whose text changed is never given an old row (its partition's digest changed).
"""

from __future__ import annotations

import logging
import mmap
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate.cache import keys
from curate.cache.names import KEY
from curate.cache.store import CacheSpec, Entry, EntryWriter, StageCache
from curate.cache.writer import HashingFile
from curate.io.batches import (
    ID,
    ORDER,
    ORDER_SHIFT,
    QuarantineRecord,
    local_orders,
    with_partition,
)
from curate.phases import mark
from curate.stages.base import REJECTED_SCHEMA, BarrierStage, StageCounts
from curate.stages.examples import COLUMN as EXAMPLE
from curate.stages.examples import with_examples

log = logging.getLogger(__name__)

QUARANTINE_ENTRY_SCHEMA = pa.schema(
    [
        pa.field("file", pa.string()),
        pa.field("line", pa.int64()),
        pa.field("reason", pa.string()),
        pa.field("bytes", pa.int64()),
        pa.field("offset", pa.int64()),
        pa.field("fields", pa.list_(pa.string())),
    ]
)


@dataclass(frozen=True)
class PassKeys:
    """What a worker needs to use the cache for one partition's pass (made by the job)."""

    spec: CacheSpec
    run: str  # the fingerprint of the run, named in the entries it writes
    data: str  # the recipe's data key, for pass 0's input key once the digest is known
    maps: tuple[str, ...]  # each map stage's identity (`keys.stage_identity`)
    basis: str | None  # the barrier's basis identity, when the pass ends at one
    digest: str | None = None  # pass 0: the partition's content digest, when known
    after: str | None = None  # pass k > 0: the key of the rows barrier k-1 saw
    input: str | None = None  # the pass's input key, once resolved (`resolved`)
    family: str | None = None  # the basis's family prefix (`keys.family_prefixes`), if any
    origin: str | None = None  # pass k > 0: the partition's pass 0 input key, when known
    map_family: str | None = None  # the map stages' family prefix (`keys.map_family_prefixes`)

    def resolved(self, partition_key: str, digest: str | None, decision: Path | None) -> PassKeys:
        """With the input key: from the partition's digest (pass 0), or from the rows the
        previous barrier saw and the digest of its decision for the partition."""
        if decision is not None:
            assert self.after is not None
            key = keys.after_barrier(self.after, keys.decision_digest(decision))
        else:
            assert digest is not None
            key = keys.input_key(partition_key, digest, self.data)
        return replace(self, digest=digest, input=key)

    def chain(self) -> list[str]:
        """The key after each map stage of the pass, in order."""
        assert self.input is not None
        out, key = [], self.input
        for identity in self.maps:
            key = keys.after_stage(key, identity)
            out.append(key)
        return out

    def end(self) -> str:
        """The key of the rows the pass ends with (what the barrier sees, or the shards)."""
        chain = self.chain()
        assert self.input is not None
        return chain[-1] if chain else self.input

    def basis_key(self) -> str | None:
        return keys.chain("basis-of", self.end(), self.basis) if self.basis else None

    def map_family_key(self) -> str | None:
        """The family key of the pass's map stages' rows (None when it has none)."""
        if self.map_family is None or self.origin is None or not self.maps:
            return None
        return keys.map_family(self.origin, self.map_family, self.maps)

    def family_key(self) -> str | None:
        """The basis's family key: the same documents' rows, whatever earlier barriers
        dropped (None when the pass has none)."""
        if self.basis is None or self.family is None or self.origin is None:
            return None
        return keys.basis_family(self.origin, self.family, self.maps, self.basis)


@dataclass
class Chunk:
    """One chunk of a replay: what the reused entries hold for it."""

    batch: pa.RecordBatch | None  # the rows after the last reused stage (None: none left)
    quarantined: list[QuarantineRecord]
    read: int
    rejected: list[pa.Table]  # in stage order, as the stages removed them
    counts: list[StageCounts | None]  # per reused map stage
    prev: StageCounts | None  # pass k > 0: the previous barrier's counts for this chunk
    basis: pa.RecordBatch | None  # the barrier's basis, when reused and called for this chunk


@dataclass
class Reuse:
    """What one partition's pass takes from the cache: the input entry, the entries of the
    first `stages` map stages, and the basis entry."""

    input: Entry | None = None
    maps: list[Entry] = field(default_factory=list)
    basis: Entry | None = None
    family: Family | None = None  # when `basis` missed: rows of the same documents, by id
    family_alias: bool = False  # the family key leads to an intact basis entry
    read_seconds: float = 0.0  # spent reading entries back, this run
    read_bytes: int = 0  # the size of the entry files read back
    docs_computed: int = 0  # documents whose basis this pass computed
    docs_reused: int = 0  # documents whose basis it took from the cache

    @property
    def stages(self) -> int:
        return len(self.maps)

    def chunks(self, cache: StageCache, partition: int, chunk_count: int) -> Iterator[Chunk]:
        """Every chunk of the pass, from the entries (needs the input entry and one map)."""
        assert self.input is not None and self.maps
        last = self.maps[-1]
        started = time.perf_counter()
        rows = _batches(cache, last, "rows.arrow", self)
        rejected = [_batches(cache, e, "rejected.arrow", self) for e in self.maps]
        quarantine = _batches(cache, self.input, "quarantine.arrow", self)
        basis = _batches(cache, self.basis, "basis.arrow", self) if self.basis else None
        read = self.input.meta.get("read")
        prev = self.input.meta.get("prev")
        for c in range(chunk_count):
            mark("cache_read")  # crash tests kill here: mid-replay
            batch = None
            if last.meta["rows"][c]:
                batch = with_partition(next(rows), partition)
            removed: list[pa.Table] = []
            for entry, batches in zip(self.maps, rejected, strict=True):
                n = entry.meta["rejected"][c]
                if n:
                    removed.append(pa.Table.from_batches([next(batches) for _ in range(n)]))
            quarantined = _quarantine_records(next(quarantine)) if read is not None else []
            counts = [_counts(e.meta["counts"][c]) for e in self.maps]
            base = None
            if basis is not None and self.basis is not None and self.basis.meta["rows"][c] >= 0:
                base = with_partition(next(basis), partition)
            chunk = Chunk(
                batch, quarantined, read[c] if read is not None else 0, removed, counts,
                _counts(prev[c]) if prev is not None else None, base,
            )  # fmt: skip
            self.read_seconds += time.perf_counter() - started
            yield chunk
            started = time.perf_counter()

    def report(self, positions: list[int], barrier: int) -> dict[str, Any]:
        """For the partition's record: the positions reused, and the runs that made them (a
        barrier's basis counts as reused when no document's was computed, from its family
        too), and the documents whose basis was computed or reused."""
        basis = self.basis
        if basis is None and self.family is not None and not self.docs_computed:
            basis = self.family.entry
        reused = positions[: self.stages] + ([barrier] if basis is not None else [])
        entries = [*self.maps, *([basis] if basis is not None else [])]
        runs = {e.meta.get("run") for e in entries}
        computed = [_computed_seconds(e) for e in entries]  # when the run that kept them ran
        out = {
            "reused": reused,
            "from": sorted(r for r in runs if isinstance(r, str)),
            "computed_seconds": dict(zip(map(str, reused), computed, strict=True)),
            "read_seconds": round(self.read_seconds, 4),
            "read_bytes": self.read_bytes,
        }
        if barrier >= 0:
            out["basis_docs"] = {"computed": self.docs_computed, "reused": self.docs_reused}
        return out

    def summary_basis(self, barrier: BarrierStage, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The barrier's basis of `batch` (which the cache did not replay): the rows the
        family entry holds for these documents, and only the others computed."""
        if self.family is not None:
            basis, computed = self.family.summary_basis(barrier, batch)
            self.docs_computed += computed
            self.docs_reused += batch.num_rows - computed
            return basis
        self.docs_computed += batch.num_rows
        return barrier.summary_basis(batch)

    def bases(self, cache: StageCache, partition: int) -> Iterator[pa.RecordBatch | None]:
        """The basis entry's batches, chunk by chunk (None where summarize was not called)."""
        assert self.basis is not None
        batches = _batches(cache, self.basis, "basis.arrow", self)
        for n in self.basis.meta["rows"]:
            started = time.perf_counter()
            basis = with_partition(next(batches), partition) if n >= 0 else None
            self.read_seconds += time.perf_counter() - started
            yield basis


def find(cache: StageCache, pass_keys: PassKeys, pass_index: int) -> Reuse:
    """The longest prefix of the pass's map stages whose entries are all present and intact,
    with the input entry it needs, and the basis entry when the pass ends at a barrier."""
    reuse = Reuse()
    assert pass_keys.input is not None
    reuse.input = _consistent(cache, cache.get(pass_keys.input))
    if reuse.input is not None:
        for key in pass_keys.chain():
            entry = _consistent(cache, cache.get(key))
            if entry is None or _chunks(entry) != _chunks(reuse.input):
                break
            reuse.maps.append(entry)
    basis_key = pass_keys.basis_key()
    if basis_key is not None:
        reuse.basis = _consistent(cache, cache.get(basis_key))
        if reuse.basis and reuse.input and _chunks(reuse.basis) != _chunks(reuse.input):
            reuse.basis = None
    family_key = pass_keys.family_key()
    if reuse.basis is None and family_key is not None:
        started = time.perf_counter()
        reuse.family = _family(cache, family_key, reuse)
        reuse.read_seconds += time.perf_counter() - started
        reuse.family_alias = reuse.family is not None
    return reuse


@dataclass
class Family:
    """A basis entry of the partition's family: its rows, and each document id's row."""

    entry: Entry
    table: pa.Table
    rows: dict[str, int]

    def summary_basis(
        self, barrier: BarrierStage, batch: pa.RecordBatch
    ) -> tuple[pa.RecordBatch, int]:
        """The basis of `batch` and how many of its documents were computed: the entry's
        row for each document it holds (its `id` and `_order` this batch's own), the
        barrier's `summary_basis` for the others, in the batch's row order, as a run
        without the cache makes it."""
        ids = batch.column(ID).cast(pa.string()).to_pylist()
        found = np.array([self.rows.get(i, -1) for i in ids], dtype=np.int64)
        have = found >= 0
        if not have.any():
            return barrier.summary_basis(batch), batch.num_rows
        where = np.flatnonzero(have)
        taken = self.table.take(pa.array(found[where]))
        if not _same_orders(taken.column(ORDER), batch.column(ORDER), where):
            log.warning("stage cache entry %s: a document's `_order` differs from the one "
                        "kept: not used", self.entry.key)  # fmt: skip
            return barrier.summary_basis(batch), batch.num_rows
        keep = pa.table(
            [pc.take(batch.column(ID), pa.array(where)).cast(self.table.schema.field(ID).type),
             pc.take(batch.column(ORDER), pa.array(where)), *taken.columns[2:]],
            schema=self.table.schema,
        )  # fmt: skip
        missing = batch.num_rows - len(where)
        if missing:
            computed = barrier.summary_basis(batch.filter(pa.array(~have)))
            if computed.schema != keep.schema:
                log.warning("stage cache entry %s holds rows of another shape: not used",
                            self.entry.key)  # fmt: skip
                return barrier.summary_basis(batch), batch.num_rows
            at = pc.index_in(computed.column(ORDER), value_set=batch.column(ORDER))
            positions = np.concatenate([where, at.to_numpy(zero_copy_only=False)])
            keep = pa.concat_tables([keep, pa.Table.from_batches([computed])])
            keep = keep.take(pa.array(np.argsort(positions, kind="stable")))
        return _one_batch(keep), missing


def _family(cache: StageCache, family_key: str, reuse: Reuse) -> Family | None:
    """The basis entry the family key leads to, checked through and loaded, or None."""
    alias = cache.get(family_key)
    if alias is None:
        return None
    target = alias.meta.get("target")
    if alias.meta.get("kind") != "family" or not isinstance(target, str):
        return None
    if not KEY.fullmatch(target):
        return None
    entry = _consistent(cache, cache.get(target))
    if entry is None or entry.meta.get("kind") != "basis" or entry.meta.get("family") != family_key:
        return None  # gone (evicted, damaged: removed) or not of this family
    try:
        table = pa.Table.from_batches(list(_batches(cache, entry, "basis.arrow", reuse)))
    except (OSError, pa.ArrowException):
        return None
    if table.num_columns < 2 or table.schema.names[:2] != [ID, ORDER] or table.num_rows == 0:
        return None
    ids = table.column(ID).cast(pa.string()).to_pylist()
    rows = {i: n for n, i in enumerate(ids)}
    if len(rows) != len(ids) or None in rows:
        log.warning("stage cache entry %s holds a document id twice: not used", entry.key)
        return None
    return Family(entry, table, rows)


def _same_orders(kept: pa.ChunkedArray, orders: pa.Array, where: np.ndarray) -> bool:
    """Whether the kept rows' partition-local `_order`s are those of the batch's rows."""
    mine = _local(pc.take(orders, pa.array(where)))
    return bool(np.array_equal(_local(kept), mine))


def _local(orders: pa.Array | pa.ChunkedArray) -> np.ndarray:
    if isinstance(orders, pa.ChunkedArray):
        orders = orders.combine_chunks()
    values = orders.to_numpy(zero_copy_only=False).astype(np.uint64)
    return values & np.uint64((1 << ORDER_SHIFT) - 1)


def _one_batch(table: pa.Table) -> pa.RecordBatch:
    table = table.combine_chunks()
    batches = table.to_batches()
    return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=table.schema)


def _chunks(entry: Entry) -> int | None:
    n = entry.meta.get("chunks")
    return n if isinstance(n, int) and n >= 0 else None


def _consistent(cache: StageCache, entry: Entry | None) -> Entry | None:
    """The entry, when its meta and its files agree on how many batches each holds (a meta
    this code did not write, or a mismatch, makes it a miss: recomputed, never replayed)."""
    if entry is None or entry.meta.get("format") != keys.ENTRY_FORMAT:
        return None
    meta, n = entry.meta, _chunks(entry)
    try:
        if meta.get("kind") == "map":
            rows, rejected = meta["rows"], meta["rejected"]
            counts = meta["counts"]
            ok = len(rows) == len(rejected) == len(counts) == n
            ok = ok and _count(cache, entry, "rows.arrow") == sum(1 for r in rows if r)
            ok = ok and _count(cache, entry, "rejected.arrow") == sum(rejected)
        elif meta.get("kind") == "basis":
            rows = meta["rows"]
            ok = len(rows) == n and _count(cache, entry, "basis.arrow") == sum(
                1 for r in rows if r >= 0
            )
        elif meta.get("kind") == "input":
            read, prev = meta.get("read"), meta.get("prev")
            ok = (read is not None and len(read) == n
                  and _count(cache, entry, "quarantine.arrow") == n) or (
                prev is not None and len(prev) == n)  # fmt: skip
        else:
            ok = False
    except (KeyError, TypeError, OSError, pa.ArrowException):
        ok = False
    if not ok:
        log.warning("stage cache entry %s does not hold what its meta says: not used", entry.key)
    return entry if ok else None


def _count(cache: StageCache, entry: Entry, name: str) -> int:
    """How many batches the entry's file holds (0 when it has none)."""
    if entry.file(name) is None:
        return 0
    fd = cache.open_file(entry, name)
    try:
        if os.fstat(fd).st_size == 0:
            return 0
        with os.fdopen(os.dup(fd), "rb") as f:
            return int(pa.ipc.open_file(f).num_record_batches)
    finally:
        os.close(fd)


# -- keeping: what a pass writes into the cache ------------------------------------------------


class _ArrowFile:
    """Batches into one Arrow IPC file, opened at the first batch (its schema for all)."""

    def __init__(self, entry: EntryWriter, name: str) -> None:
        self.entry = entry
        self.name = name
        self.sink: HashingFile | None = None
        self.writer: pa.ipc.RecordBatchFileWriter | None = None
        self.schema: pa.Schema | None = None
        self.broken = False

    def write(self, batch: pa.RecordBatch) -> None:
        if self.broken:
            return
        if self.writer is None:
            self.sink = self.entry.open(self.name)
            self.writer = pa.ipc.new_file(self.sink, batch.schema)
            self.schema = batch.schema
        elif batch.schema != self.schema:  # cannot be kept in one file: keep nothing
            self.broken = True
            return
        self.writer.write_batch(batch)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        if self.sink is not None:
            self.sink.close()
            self.sink = None


class Keeper:
    """Everything one partition's pass writes into the cache, committed when the pass ends."""

    def __init__(
        self, cache: StageCache, pass_keys: PassKeys, reuse: Reuse, *, keep_input: bool
    ) -> None:
        self.cache = cache
        self.reuse = reuse
        self.run = pass_keys.run
        self.chunks = 0
        self.input: _InputKeeper | None = None
        if keep_input and pass_keys.input is not None and reuse.input is None:
            self.input = _InputKeeper(cache.writer(pass_keys.input))
        chain = pass_keys.chain()
        self.maps = [_MapKeeper(cache.writer(key)) for key in chain[reuse.stages :]]
        self.basis: _BasisKeeper | None = None
        basis_key = pass_keys.basis_key()
        family = pass_keys.family_key()
        if basis_key is not None and reuse.basis is None:
            self.basis = _BasisKeeper(cache.writer(basis_key), family)
        self.alias: tuple[str, str] | None = None  # the family key, the basis it leads to
        if self.basis is not None and family is not None and not reuse.family_alias:
            assert basis_key is not None  # a family key that leads nowhere now leads here
            self.alias = (family, basis_key)
        # The map family leads to the entries of every map stage of this chain: those this
        # pass writes and those it replayed (kept under the same input key, so they hold the
        # same documents in the same chunks). A pass that replays some stages and computes
        # the rest (a tokenizer changed) leads its family there too, or the next change of
        # an earlier decision (a MinHash threshold) would find no family and run pii again.
        # A pass that replays every stage writes nothing (its chain's alias was written when
        # its last stage was computed).
        self.map_alias: tuple[str, list[str]] | None = None  # map family, the entries
        map_family = pass_keys.map_family_key()
        computes = reuse.stages < len(chain)
        if map_family is not None and computes and pass_keys.input is not None:
            self.map_alias = (map_family, chain)

    def begin_chunk(self) -> None:
        self.chunks += 1
        for keeper in self._all():
            keeper.begin_chunk()

    def _all(self) -> list[_Keeper]:
        out: list[_Keeper] = [*self.maps]
        if self.input is not None:
            out.append(self.input)
        if self.basis is not None:
            out.append(self.basis)
        return out

    def commit(self) -> None:
        reuse = self.reuse
        if self.basis is not None and reuse.family is not None and not reuse.docs_computed:
            self.basis.abort()  # every row is its family entry's: kept once (found by family)
            self.basis = None
        for keeper in self._all():
            keeper.commit(self.chunks, self.run)
        if self.alias is not None and self.basis is not None and self.basis.writer.landed:
            _alias(self.cache, *self.alias, self.run)
        if self.map_alias is not None and all(m.writer.landed for m in self.maps):
            family, targets = self.map_alias
            _alias(self.cache, family, targets, self.run, kind="map-family")

    def abort(self) -> None:
        for keeper in self._all():
            keeper.abort()


class _Keeper:
    def __init__(self, writer: EntryWriter, kind: str) -> None:
        self.writer = writer
        self.kind = kind
        self.files: list[_ArrowFile] = []
        self.started = time.perf_counter()

    def file(self, name: str) -> _ArrowFile:
        f = _ArrowFile(self.writer, name)
        self.files.append(f)
        return f

    def begin_chunk(self) -> None:
        raise NotImplementedError

    def meta(self) -> dict[str, Any]:
        raise NotImplementedError

    def commit(self, chunks: int, run: str) -> None:
        for f in self.files:
            f.close()
        if any(f.broken for f in self.files):
            self.writer.abort()
            return
        meta = {"kind": self.kind, "format": keys.ENTRY_FORMAT, "chunks": chunks, "run": run}
        self.writer.commit(meta | self.meta())

    def abort(self) -> None:
        for f in self.files:
            f.close()
        self.writer.abort()


class _InputKeeper(_Keeper):
    def __init__(self, writer: EntryWriter) -> None:
        super().__init__(writer, "input")
        self.quarantine = self.file("quarantine.arrow")
        self.read: list[int] = []
        self.prev: list[dict[str, Any] | None] = []
        self.first_pass = False

    def begin_chunk(self) -> None:
        self.read.append(0)
        self.prev.append(None)

    def chunk_read(self, n: int, quarantined: list[QuarantineRecord]) -> None:
        self.first_pass = True
        self.read[-1] = n
        self.quarantine.write(_quarantine_batch(quarantined))

    def chunk_prev(self, counts: StageCounts) -> None:
        self.prev[-1] = counts.to_dict()

    def meta(self) -> dict[str, Any]:
        return {"read": self.read} if self.first_pass else {"prev": self.prev}


class _MapKeeper(_Keeper):
    def __init__(self, writer: EntryWriter) -> None:
        super().__init__(writer, "map")
        self.rows_file = self.file("rows.arrow")
        self.rejected_file = self.file("rejected.arrow")
        self.rows: list[int] = []
        self.rejected: list[int] = []
        self.counts: list[dict[str, Any] | None] = []

    def begin_chunk(self) -> None:
        self.rows.append(0)
        self.rejected.append(0)
        self.counts.append(None)

    def chunk(self, batch: pa.RecordBatch, removed: list[pa.Table], counts: StageCounts) -> None:
        """What the stage did to this chunk (called only when the stage was called)."""
        if batch.num_rows:
            self.rows_file.write(local_orders(batch))
            self.rows[-1] = batch.num_rows
        for table in removed:  # with the examples' text, when chosen (curate.examples)
            schema = REJECTED_SCHEMA
            if EXAMPLE in table.column_names:
                schema = with_examples(REJECTED_SCHEMA)
            for part in table.cast(schema).to_batches():
                self.rejected_file.write(part)
                self.rejected[-1] += 1
        self.counts[-1] = counts.to_dict()

    def meta(self) -> dict[str, Any]:
        return {"rows": self.rows, "rejected": self.rejected, "counts": self.counts}


class _BasisKeeper(_Keeper):
    def __init__(self, writer: EntryWriter, family: str | None) -> None:
        super().__init__(writer, "basis")
        self.basis = self.file("basis.arrow")
        self.rows: list[int] = []
        self.seconds = 0.0
        self.family = family

    def begin_chunk(self) -> None:
        self.rows.append(-1)

    def chunk(self, basis: pa.RecordBatch, seconds: float) -> None:
        self.basis.write(local_orders(basis))
        self.rows[-1] = basis.num_rows
        self.seconds += seconds

    def meta(self) -> dict[str, Any]:
        family = {"family": self.family} if self.family is not None else {}
        return {"rows": self.rows, "seconds": round(self.seconds, 4), **family}


def _alias(
    cache: StageCache, family: str, target: str | list[str], run: str, kind: str = "family"
) -> None:
    """Make `family` lead to the basis entry `target` (or, for a map family, to the map
    entries `target` lists): a stale alias (its target evicted or found damaged, or kept
    under another decision) is replaced. Nothing is kept when another run's alias landed."""
    try:
        cache.discard(family)
        writer = cache.writer(family)
        writer.commit({"kind": kind, "format": keys.ENTRY_FORMAT, "target": target,
                       "run": run})  # fmt: skip
    except OSError as exc:  # the cache is never a reason for a run to fail
        log.warning("stage cache: family %s not kept: %s", family, exc)


def open_cache(spec: CacheSpec) -> StageCache:
    return StageCache(spec)


# -- helpers ---------------------------------------------------------------------------------


def _computed_seconds(entry: Entry) -> float:
    """What computing an entry took the run that kept it."""
    if entry.meta.get("kind") == "basis":
        seconds = entry.meta.get("seconds", 0.0)
        return float(seconds) if isinstance(seconds, (int, float)) else 0.0
    counts = entry.meta.get("counts") or []
    return round(sum(c.get("seconds", 0.0) for c in counts if isinstance(c, dict)), 4)


def _batches(
    cache: StageCache, entry: Entry | None, name: str, reuse: Reuse | None = None
) -> Iterator[pa.RecordBatch]:
    """The batches of an entry's file, mapped through a descriptor the cache opened (an
    entry with no such file had no batch to keep); its size counted in `reuse`."""
    if entry is None or entry.file(name) is None:
        return iter(())
    fd = cache.open_file(entry, name)
    try:
        size = os.fstat(fd).st_size
        if reuse is not None:
            reuse.read_bytes += size
        if size == 0:
            return iter(())
        mapped = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
    finally:
        os.close(fd)
    reader = pa.ipc.open_file(pa.py_buffer(mapped))
    return (reader.get_batch(i) for i in range(reader.num_record_batches))


def _counts(data: dict[str, Any] | None) -> StageCounts | None:
    return StageCounts.from_dict(data) if data is not None else None


def _quarantine_batch(records: list[QuarantineRecord]) -> pa.RecordBatch:
    return pa.record_batch(
        [
            pa.array([r.file for r in records], pa.string()),
            pa.array([r.line for r in records], pa.int64()),
            pa.array([r.reason for r in records], pa.string()),
            pa.array([r.nbytes for r in records], pa.int64()),
            pa.array([r.offset for r in records], pa.int64()),
            pa.array(
                [list(r.fields) if r.fields is not None else None for r in records],
                pa.list_(pa.string()),
            ),
        ],
        schema=QUARANTINE_ENTRY_SCHEMA,
    )


def _names(fields: tuple[str, ...] | None) -> list[str] | None:
    return list(fields) if fields is not None else None


def _quarantine_records(batch: pa.RecordBatch) -> list[QuarantineRecord]:
    out = []
    for row in batch.to_pylist():
        fields = tuple(row["fields"]) if row["fields"] is not None else None
        out.append(QuarantineRecord(row["file"], row["line"], row["reason"], row["bytes"],
                                    fields, row["offset"]))  # fmt: skip
    return out


def checked(cache: StageCache, entry: Entry | None) -> Entry | None:
    """The entry when its meta and its files agree (see `_consistent`), else None."""
    return _consistent(cache, entry)


def entry_batches(cache: StageCache, entry: Entry, name: str) -> Iterator[pa.RecordBatch]:
    """The batches of one file of an entry, as a replay reads them (mapped, not copied)."""
    return _batches(cache, entry, name)

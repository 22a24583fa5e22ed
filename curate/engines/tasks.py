"""The work of one partition in one pass, shared by every engine.

A pass reads a partition (from the inputs in the first pass, from the previous
pass's staged file after that), drops what the previous barrier decided, runs the
segment's fused map stages, and then either summarizes for the next barrier while
staging the surviving rows, or writes the final shards. It returns a small record
(`curate.staging.record.PartitionRecord`: counts, timings, files and their checksums)
that is both the partition's completion marker and its fragment of the manifest.
"""

from __future__ import annotations

import errno
import gc
import logging
import os
import pickle
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar, cast

import pyarrow as pa
import pyarrow.compute as pc

from curate import input_watch
from curate.cache import by_document
from curate.cache.by_document import ByDocument, StageRun
from curate.cache.replay import Chunk, Keeper, PassKeys, Reuse, find
from curate.cache.store import StageCache
from curate.engines.segments import SegmentWriter
from curate.engines.staged_rows import staged_rows, unfiltered_rows
from curate.engines.work_meter import metered
from curate.errors import CurateError, DiskFull
from curate.excluded_rows import (
    Ahead,
    ahead_summaries,
    forgot_before,
    hits,
    listed,
    summarize_ahead,
    without,
)
from curate.io.batches import (
    ID,
    ORDER,
    FieldSpec,
    QuarantineRecord,
    order_column,
    quarantine_table,
)
from curate.io.partition_digest import partition_digest
from curate.io.partitions import Partition
from curate.output.packing import PackSpec
from curate.output.partition_output import PartitionOutput
from curate.output.shards import read_stream, write_table
from curate.output.splits import SplitSpec
from curate.phases import mark
from curate.quarantine_limits import check_partition, tally
from curate.reading import read_partition
from curate.stages.base import (
    REJECTED_SCHEMA,
    BarrierStage,
    MapStage,
    Stage,
    StageCounts,
    dropping,
    keeping,
)
from curate.stages.chain import run_maps
from curate.stages.examples import candidates, removed_rows
from curate.staging.names import Staging
from curate.staging.record import Checkpoint, PartitionRecord, resumable, write_json

log = logging.getLogger(__name__)

_READY: dict[str, Stage] = {}


S = TypeVar("S", bound=Stage)


def ready(stage: S) -> S:
    """The stage with `setup()` done, once per worker process for equal stage configurations.

    Equal means the same class, parameters, context and software (a tokenizer's file
    digests are in its software: a tokenizer edited on disk is loaded again). In a process
    the engine started for curate's work alone (`freeze_setups`), what the setup built is
    then frozen out of the cyclic garbage collector's reach, as a forked worker's inherited
    set-up is (`local._frozen_for_fork`).
    """
    key = ready_key(stage)
    cached = _READY.get(key)
    if cached is None:
        stage.setup()
        _READY[key] = cached = stage
        if _FREEZE_SETUPS:
            gc.freeze()
    return cast(S, cached)


_FREEZE_SETUPS = False


def freeze_setups() -> None:
    """Called by a worker process of the local engine as it starts (never in the driver, a
    notebook's process through the Python API): its modules now, and each stage's setup
    as `ready` makes it, are frozen for the worker's life.

    A set-up stage lives as long as the worker, and the pii stage's Presidio is tens of
    thousands of objects: every full collection in the worker scanned them all again. A
    worker forked from the driver inherits them frozen; one started from a forkserver (the
    driver ran threads, or had imported polars) or set up after the fork (any stage but
    pii, or pii when the driver expected its output from the stage cache) builds its own,
    and froze nothing. Frozen objects are still freed when their last reference goes; only
    a cycle among them is never collected. A set-up stage is not garbage, and what else was
    alive at that moment (the partition's batch in hand) is freed as usual, but for a cycle
    among it, which stays until the worker exits with the pool, at the end of the build."""
    global _FREEZE_SETUPS
    _FREEZE_SETUPS = True
    gc.freeze()


def ready_key(stage: Stage) -> str:
    """The key `ready` keeps a stage under: the same in every worker of a run."""
    return (
        f"{type(stage).__module__}.{type(stage).__qualname__}:{stage.params.model_dump_json()}"
        f":{stage.context!r}:{sorted(stage.software().items())}"
    )


def set_up_stages() -> dict[str, Stage]:
    """The stages this process has set up (`ready`), by the key of their configuration: the
    same key in every worker of a run for the same stage."""
    return _READY


@dataclass(frozen=True)
class RunSettings:
    """How every partition of a run is read and written, whatever the pass: the recipe's
    settings, made once by the build and shared by the job and each of its tasks."""

    fields: FieldSpec
    on_error: str
    final_schema: pa.Schema  # the shards' columns
    shard_bytes: int  # shards, and staged segments, close at about this size
    fsync: bool = True
    file_mode: int = 0o640
    write_rejected: bool = True
    batch_bytes: int = 8 << 20
    max_document_bytes: int = 64 << 20
    packing: PackSpec | None = None  # rows packed per partition by the shard writer
    split: SplitSpec | None = None  # held-out splits, decided per document at shard writing
    stop_early: bool = False  # fail when every record of a partition lacks the same field
    excluded: tuple[str, ...] = ()  # ids `curate forget` removed (sorted): never written
    excluded_lines: frozenset[tuple[str, int]] = frozenset()  # quarantined: never listed


@dataclass
class PassTask:
    """Everything a worker needs to run one partition through one pass."""

    pass_index: int
    partition: Partition
    staging: Staging
    settings: RunSettings
    maps: list[MapStage]
    positions: list[int]  # each map stage's position in the recipe
    previous: BarrierStage | None = None  # the barrier whose decision this pass applies
    previous_position: int = -1
    barrier: BarrierStage | None = None  # the barrier this pass summarizes for; None: final
    barrier_position: int = -1
    cache: PassKeys | None = None  # the stage cache's keys for this pass (None: cache off)
    ahead: tuple[Ahead, ...] = ()  # the later passes whose barriers this pass can
    # summarize forgotten documents for (`curate.excluded_rows`)
    rebuild: tuple[Ahead, ...] = ()  # the passes before this one, when this pass rebuilds
    # the forgotten documents they left out from the inputs (`curate.excluded_rows`)

    @property
    def final(self) -> bool:
        return self.barrier is None


def _source_chunks(
    task: PassTask,
    record: PartitionRecord,
    digest: str | None = None,
    cache: StageCache | None = None,
) -> Iterator[tuple[pa.RecordBatch | None, list[QuarantineRecord]]]:
    """Chunks entering this pass, each batch with the hidden `_order` column, in a fixed order.

    The chunking is a pure function of the partition, so a resumed run that skips the
    chunks a checkpoint covers continues exactly where the interrupted run stopped.
    """
    part = task.partition
    if task.pass_index == 0:
        record.input_stat = list(input_watch.discovered(part.input))
        for batch, quarantined in _read_input(task):
            record.read += _rows(batch)
            yield batch, quarantined
        record.digest = digest or partition_digest(part)  # from the page cache just filled,
        input_watch.check(part.input)  # and what was read is the input as discovered, all of it
        return
    for batch in staged_rows(task.staging, task.pass_index - 1, part, cache):
        mark("reading")
        yield batch, []


def _read_input(
    task: PassTask,
) -> Iterator[tuple[pa.RecordBatch | None, list[QuarantineRecord]]]:
    """The partition's records as the first pass reads them, each batch with `_order`: the
    first pass, and a later pass rebuilding forgotten documents (`_rebuilt`), read the same."""
    part = task.partition
    row = 0
    for chunk in read_partition(
        part,
        task.settings.fields,
        on_error=task.settings.on_error,
        batch_bytes=task.settings.batch_bytes,
        max_document_bytes=task.settings.max_document_bytes,
        locate=True,  # lineage: each record's line and offset, kept by the shard writer
    ):
        mark("reading")
        batch = chunk.batch
        n = batch.num_rows
        if n == 0:
            yield None, chunk.quarantined
            continue
        order = order_column(part.index, row, n)
        row += n
        yield batch.append_column(ORDER, pa.array(order, pa.uint64())), chunk.quarantined


SourceChunk = tuple[pa.RecordBatch | None, list[QuarantineRecord], "Chunk | None"]
"""A chunk entering a pass: its rows, what could not be read, what the cache replayed."""


def run_pass_task(task: PassTask) -> PartitionRecord:
    """Run one partition through one pass and write its completion record."""
    return PartitionRun(task).run()


class PartitionRun:
    """One partition through one pass, checkpointed each time a shard or segment completes.

    A checkpoint (`Staging.checkpoint`) names the source chunks consumed, the shards or
    segments completed, the side outputs flushed, the counters so far and the packer's
    carried tokens. Side outputs are flushed at the same points whether or not a run was
    interrupted, so a resumed partition's files are byte-identical to an uninterrupted one's.
    """

    def __init__(self, task: PassTask) -> None:
        self.task = task
        self.settings = task.settings
        self.part = task.partition
        self.out_dir = task.staging.pass_dir(task.pass_index)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.record = PartitionRecord(self.part.key, task.pass_index, self.part.input.name)
        self.maps = list(task.maps)  # set up (once per worker) when first run: not if reused
        self.counts = {pos: StageCounts() for pos in task.positions}
        self.previous = ready(task.previous) if task.previous is not None else None
        self.prev_counts = StageCounts()
        self.drops = _drops(task)
        self.rejected: list[pa.Table] = []
        # forgotten documents' summaries for later barriers, by pass (curate.excluded_rows)
        self.ahead: dict[int, list[pa.RecordBatch]] = {}
        self.quarantined: list[QuarantineRecord] = []
        self.consumed = 0
        self.flushes = 0
        self.writer: PartitionOutput | None = None
        self.segments: SegmentWriter | None = None
        self._packer_file: str | None = None  # the packers' state the checkpoint on disk names
        packer_state = self._resume()
        self.keys = task.cache  # the stage cache's keys (curate.cache.replay), None: off
        self.reuse = Reuse()  # what this pass takes from the cache
        self.keeper: Keeper | None = None  # what it keeps there
        self.documents: ByDocument | None = None  # map stages' work reused by document
        self.cache: StageCache | None = None  # held while the pass runs
        # an earlier pass dropped forgotten documents of this partition: what this pass
        # computes lacks them, so it keeps no entry a run without them would replay
        self.lost = forgot_before(task.staging, task.pass_index, self.part.key,
                                  task.settings.excluded)  # fmt: skip
        files = self.record.files
        run = self.settings
        if task.final:
            self.writer = PartitionOutput(
                task.staging.out, self.part.key, run.final_schema, run.shard_bytes,
                packing=run.packing, split=run.split, done=files.shards,
                fsync=run.fsync, file_mode=run.file_mode, relative_to=task.staging.root,
                lineage=self.out_dir, lineage_done=len(files.lineage),
            )  # fmt: skip
            if packer_state is not None:
                self.writer.restore(packer_state)
        else:
            self.segments = SegmentWriter(
                task.staging, task.pass_index, self.part.key, run.shard_bytes, fsync=run.fsync
            )
            self.segments.segments = list(files.segments)
            if task.pass_index > 0 and not task.maps and not _changes(task.previous):
                # its rows: those it reads, less drops (not when the barrier changes them)
                self.record.rows_from = {"source": True}
                self.segments.rows = False

    # -- the pass ---------------------------------------------------------------------
    def run(self) -> PartitionRecord:
        if self.keys is None:
            return self._run()
        from curate.cache.store import StageCache

        with StageCache(self.keys.spec).using() as cache:  # nothing evicted while it reads
            self.cache = cache
            return self._run()

    def _run(self) -> PartitionRecord:
        started = time.perf_counter()
        skip = self.consumed
        try:
            at = self.task.staging.progress(self.task.pass_index, self.part.key)
            span = None  # a first pass over a byte range counts the input bytes it read
            if self.task.pass_index == 0 and self.part.input.format == "jsonl":
                span = (self.part.start, self.part.stop)
            for i, (batch, quarantined, chunk) in enumerate(metered(self._chunks(), at, span)):
                if i < skip:
                    continue  # done before the interruption; its side outputs are on disk
                if self.keeper is not None and (
                    self.lost
                    or _holds_excluded(batch, self.settings.excluded)
                    or listed(quarantined, self.settings.excluded_lines)[1]
                ):
                    self.keeper.abort()  # its text would be in the entries (curate.forget)
                    self.keeper = None
                if self.keeper is not None:
                    self.keeper.begin_chunk()
                    if self.keeper.input is not None and self.task.pass_index == 0:
                        self.keeper.input.chunk_read(_rows(batch), quarantined)
                self.quarantined.extend(quarantined)
                if chunk is not None:
                    self._replayed(chunk)
                if batch is not None:
                    self._process(batch, chunk)
                self.consumed = i + 1
                if self._completed_a_file():
                    self._checkpoint()
            self._finish()
            if self.keeper is not None:
                self.keeper.commit()  # before the record: a rerun trusting it finds them
            if self.task.pass_index == 0 and self.settings.stop_early:
                check_partition(self.record, self.part.input.label, str(self.part.index))
        except OSError as exc:
            if self.keeper is not None:
                self.keeper.abort()
            if exc.errno == errno.ENOSPC:
                raise DiskFull(f"disk full while writing {self.out_dir}") from None
            raise
        except BaseException:
            if self.keeper is not None:
                self.keeper.abort()
            raise
        self.record.seconds = round(time.perf_counter() - started, 4)
        write_json(self.task.staging.record(self.task.pass_index, self.part.key),
                   self.record.to_json(), self.settings.fsync)  # fmt: skip
        self._checkpoint_path().unlink(missing_ok=True)
        return self.record

    def _chunks(
        self,
    ) -> Iterator[tuple[pa.RecordBatch | None, list[QuarantineRecord], Chunk | None]]:
        """The pass's chunks: read (or staged) and run from the first stage, or, when the
        stage cache holds the first stages' output for this partition, replayed from it."""
        keys = self.keys
        if keys is None:
            for batch, quarantined in _source_chunks(self.task, self.record):
                yield batch, quarantined, None
            return
        hashed = None  # the digest this worker took of the bytes, when it took one
        if self.task.pass_index == 0:  # what the partition holds, hashed before it is read
            if keys.digest is None:  # (else an earlier build's, of the file as it is now)
                hashed = partition_digest(self.part)
            keys = self.keys = keys.resolved(self.part.key, keys.digest or hashed, None)
        else:
            decision = self.task.staging.decision(self.task.pass_index - 1, self.part.key)
            keys = self.keys = keys.resolved(self.part.key, None, decision)
        cache = self.cache
        assert cache is not None
        self.reuse = reuse = find(cache, keys, self.task.pass_index)
        if self.lost:  # its entries were kept before the forget: they hold and count the
            # documents an earlier pass dropped (curate.excluded_rows); by document, they serve
            reuse = self.reuse = Reuse(family=reuse.family, read_seconds=reuse.read_seconds)
        if self.consumed == 0 and reuse.input is None and self.task.pass_index > 0:
            self.documents = self._by_document(cache, keys)
        if self.documents is not None:  # the family's entries serve; a rerun starts over
            self.record.cache = {"by_document": True}
            for pos, counts in zip(self.task.positions, self.documents.old_counts(), strict=False):
                self.counts[pos].add(counts)
        elif self.consumed == 0:  # a resumed partition keeps nothing: its entries would lack chunks
            self.keeper = Keeper(cache, keys, reuse, keep_input=True)
        self.record.cache_key = keys.end()
        replayed = bool(self.maps) and reuse.stages == len(self.maps)
        if self.segments is not None and replayed and self.consumed == 0:
            # the last stage's entry holds the very rows to stage: they are not written again
            self.record.rows_from = {"entry": reuse.maps[-1].key}
            self.segments.rows = False
        if reuse.stages:
            assert reuse.input is not None
            if self.task.pass_index == 0:
                self.record.input_stat = list(input_watch.discovered(self.part.input))
                self.record.digest = keys.digest
            for chunk in reuse.chunks(cache, self.part.index, reuse.input.meta["chunks"]):
                # counted as it is read, as `_source_chunks` counts: a resumed partition
                # skips the chunks its checkpoint covers, and their documents were read too
                self.record.read += chunk.read
                yield chunk.batch, chunk.quarantined, chunk
            if self.task.pass_index == 0:
                input_watch.check(self.part.input)
            return
        bases = reuse.bases(cache, self.part.index) if reuse.basis is not None else None
        for batch, quarantined in _source_chunks(self.task, self.record, hashed, cache):
            basis = next(bases, None) if bases is not None else None  # short: computed
            yield batch, quarantined, Chunk(None, [], 0, [], [], None, basis) if bases else None
        if self.task.pass_index == 0 and self.record.digest != keys.digest and self.keeper:
            log.warning("partition %s does not hold what its stat promised: nothing kept "
                        "in the stage cache", self._where())  # fmt: skip
            self.keeper.abort()
            self.keeper = None

    def _by_document(self, cache: StageCache, keys: PassKeys) -> ByDocument | None:
        """The entries of this pass's map stages kept under another decision, when they can
        serve document by document (`curate.cache.by_document`): every document they
        counted must be found again in the staged rows, to be counted out if dropped now."""
        family = keys.map_family_key()
        if family is None:
            return None
        found = by_document.load(cache, family, len(self.maps))
        if found is None:
            return None
        staged: set[str] = set()
        for batch in self._unfiltered(cache):
            staged.update(batch.column(ID).cast(pa.string()).to_pylist())
        if not found.entered <= staged:
            log.info("partition %s pass %d: the stage cache's entries hold documents not staged "
                     "now: computed", self._where(), self.task.pass_index)  # fmt: skip
            return None
        return found

    def _unfiltered(self, cache: StageCache) -> Iterator[pa.RecordBatch]:
        k = self.task.pass_index - 1
        return unfiltered_rows(self.task.staging, k, self.part, cache)

    def _compute(self, batch: pa.RecordBatch) -> StageRun:
        """`batch` through the pass's map stages, each stage's tables and counts apart."""
        tables: list[list[pa.Table]] = []
        counts: list[StageCounts] = []
        for at in range(len(self.maps)):
            c, removed = StageCounts(), list[pa.Table]()
            if batch.num_rows:
                self.maps[at] = stage = ready(self.maps[at])
                batch = run_maps(batch, [stage], [c], removed)
            tables.append(removed)
            counts.append(c)
        return batch, tables, counts

    def _replayed(self, chunk: Chunk) -> None:
        """Count what the reused stages did to this chunk, as a run of them would have (its
        documents read were counted as `_chunks` read it)."""
        if chunk.prev is not None:
            self.prev_counts.add(_no_seconds(chunk.prev))
        for pos, counts in zip(self.task.positions, chunk.counts, strict=False):
            if counts is not None:
                self.counts[pos].add(_no_seconds(counts))
        self.rejected.extend(chunk.rejected)

    def _process(self, batch: pa.RecordBatch, chunk: Chunk | None = None) -> None:
        start = self.reuse.stages if chunk is not None and chunk.counts else 0
        if self.task.final and not start and self.settings.excluded:
            batch = self._forget(batch)  # nothing ahead needs them (curate.excluded_rows)
            if batch.num_rows == 0:
                return
        if self.previous is not None and self.drops is not None and not start:
            t = time.perf_counter()
            result = self.previous.apply(batch, self.drops.ids, self.drops.changes)
            counts = StageCounts(docs_in=batch.num_rows, docs_out=result.batch.num_rows)
            counts.changed = result.changed
            counts.counters.update(result.counters or {})
            if result.batch.num_rows < batch.num_rows:
                counts.removed.update(
                    self.drops.reasons_in(batch, result.batch, self.part.input.name)
                )
            counts.observe(self.previous, batch, result)  # its statistics (curate.stats)
            counts.seconds = time.perf_counter() - t
            self.prev_counts.add(counts)
            if self.keeper is not None and self.keeper.input is not None:
                self.keeper.input.chunk_prev(counts)
            batch = result.batch
        done = None
        if self.documents is not None and batch.num_rows:
            done = self.documents.process(batch, self.maps, self._compute)
            if done is None:  # computed whole: its old documents are counted out at the end
                self.documents.fallback_chunks += 1
        if done is not None:
            batch, tables, computed = done
            for at, c in enumerate(computed):
                self.counts[self.task.positions[at]].add(c)
            self.rejected.extend(tables)
            start = len(self.maps)
        for at in range(start, len(self.maps)):
            if batch.num_rows == 0:
                break
            counts, removed = StageCounts(), list[pa.Table]()
            self.maps[at] = stage = ready(self.maps[at])
            batch = run_maps(batch, [stage], [counts], removed)
            self.counts[self.task.positions[at]].add(counts)
            self.rejected.extend(removed)
            if self.keeper is not None:
                self.keeper.maps[at - start].chunk(batch, removed, counts)
        if batch.num_rows == 0:
            return
        if self.writer is not None:
            mark("shard_write")
            batch = self._forget(batch)  # after every stage and barrier (curate.forget)
            self.writer.write(batch.drop_columns([ORDER]))
            return
        barrier = self.task.barrier
        assert barrier is not None and self.segments is not None
        mark("barrier")
        basis = chunk.basis if chunk is not None else None
        if basis is None:
            t = time.perf_counter()
            basis = self.reuse.summary_basis(barrier, batch)  # by document from its family
            if self.keeper is not None and self.keeper.basis is not None:
                self.keeper.basis.chunk(basis, time.perf_counter() - t)
        else:
            self.reuse.docs_reused += batch.num_rows
        summary = barrier.summary_from_basis(basis)  # forgotten documents' too: decide needs them
        if self.segments.rows:
            if self.task.ahead and self.settings.excluded:  # later barriers' summaries
                self._summarize_ahead(batch.filter(hits(batch, self.settings.excluded)))
            batch = self._forget(batch)  # their text staged for no pass (curate.excluded_rows)
        self.segments.write(batch, summary)

    def _summarize_ahead(self, gone: pa.RecordBatch) -> None:
        """Forgotten documents' summaries for the later barriers this pass can make them for
        (`curate.excluded_rows`), staged by `_flush_side_outputs`."""
        if gone.num_rows == 0 or not self.task.ahead:
            return
        steps = [Ahead([ready(m) for m in a.maps], ready(a.barrier)) for a in self.task.ahead]
        for target, rows in summarize_ahead(gone, steps, self.task.pass_index):
            self.ahead.setdefault(target, []).append(rows)

    def _rebuilt(self) -> pa.RecordBatch | None:
        """The forgotten documents an earlier pass left out, as this pass's map stages leave
        them: read from the input again and run through every pass before this one, each
        barrier's decision applied (`curate.excluded_rows`). Nothing of it is counted, kept
        or shown: they were counted as forgotten where they left."""
        excluded = self.settings.excluded
        found = [b.filter(hits(b, excluded)) for b, _ in _read_input(self.task) if b is not None]
        input_watch.check(self.part.input)  # the input the first pass read, unchanged
        found = [b for b in found if b.num_rows]
        if not found:
            return None
        rows = pa.Table.from_batches(found).combine_chunks().to_batches()[0]
        staging = self.task.staging
        steps = [*self.task.rebuild, Ahead(self.maps, cast(BarrierStage, self.task.barrier))]
        for k, step in enumerate(steps):
            if step.maps and rows.num_rows:
                maps = [ready(m) for m in step.maps]
                rows = run_maps(rows, maps, [StageCounts() for _ in maps], [])
            if k < len(self.task.rebuild) and rows.num_rows:
                drops = read_drops(staging, k, self.part.key, step.barrier)
                rows = ready(step.barrier).apply(rows, drops.ids, drops.changes).batch
        return rows if rows.num_rows else None

    def _forget(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The batch less the documents `curate forget` removed, counted where they go."""
        batch, dropped = without(batch, self.settings.excluded)
        self.record.forgotten += dropped
        return batch

    def _finish(self) -> None:
        files = self.record.files
        if self.writer is not None:
            files.shards += self.writer.finish()
            files.lineage += self.writer.take_lineage()
            self._stage_tails()
        if self.segments is not None:
            k = self.task.pass_index - 1 if self.settings.excluded else -1  # (none without)
            mine, later = ahead_summaries(self.task.staging, k, self.part, self.drops)
            for summary in mine:
                self.segments.write(summary.slice(0, 0), summary)  # rows: none to stage
            for target, rows in later.items():  # for the barriers after this one: handed on
                self.ahead.setdefault(target, []).extend(rows)
            rebuilt = self._rebuilt() if self.task.rebuild and self.lost else None
            if rebuilt is not None:  # left out before a barrier that changed what it kept
                ends = ready(cast(BarrierStage, self.task.barrier))
                summary = ends.summary_from_basis(ends.summary_basis(rebuilt))
                self.segments.write(summary.slice(0, 0), summary)  # rows: none to stage
                self._summarize_ahead(rebuilt)
            self.segments.close_segment()
            files.segments = self.segments.segments
        self._flush_side_outputs()
        if self.drops is not None and len(self.drops.ids) and self.settings.write_rejected:
            path = self.task.staging.barrier_rejected(self.task.pass_index, self.part.key)
            rows, _ = without(self.drops.rows, self.settings.excluded)
            info = write_table(path, rows, fsync=self.settings.fsync,
                               relative_to=self.task.staging.root)  # fmt: skip
            files.rejected.append(info.to_dict())
        if self.documents is not None and self.cache is not None:
            recounted = self.documents.recount(self._unfiltered(self.cache), self._compute)
            for at, c in enumerate(recounted):  # what the entries counted of documents gone
                self.counts[self.task.positions[at]].subtract(c)
        self._store_counts()
        if self.keys is not None:
            barrier = self.task.barrier_position if self.task.barrier is not None else -1
            self.record.cache = self.reuse.report(self.task.positions, barrier)
            if self.documents is not None:
                self.record.cache["by_document"] = self.documents.report()

    def _stage_tails(self) -> None:
        """The packers' short last rows, as tail files beside the record (written before it,
        like every file it names), for the publish-time tail shard."""
        assert self.writer is not None
        run, staging = self.settings, self.task.staging
        files = self.record.files
        files.tails = []  # a resumed partition writes them again, the same
        for name, rows in self.writer.tails().items():
            path = staging.tail(self.task.pass_index, self.part.key, name)
            info = write_table(path, pa.Table.from_batches([rows]), fsync=run.fsync,
                               file_mode=run.file_mode, relative_to=staging.root)  # fmt: skip
            files.tails.append(replace(info, split=name).to_dict())

    def _where(self) -> str:
        """The partition in a message: its place in this run's plan and its range."""
        part = self.part
        return f"{part.index} ({part.key}: {part.unit} {part.start}-{part.stop})"

    # -- checkpoints ------------------------------------------------------------------
    def _completed_a_file(self) -> bool:
        if self.writer is not None:
            return self.writer.completed()
        assert self.segments is not None
        return len(self.segments.segments) > len(self.record.files.segments)

    def _flush_side_outputs(self) -> None:
        files, run = self.record.files, self.settings
        staging, k, p = self.task.staging, self.task.pass_index, self.part.key
        for target, rows in sorted(self.ahead.items()):  # forgotten ones' later summaries
            path = staging.pass_dir(k) / f"ahead-{target}-{p}-{self.flushes:05d}.arrow"
            info = write_table(path, pa.Table.from_batches(rows), fsync=run.fsync,
                               relative_to=staging.root)  # fmt: skip
            self.record.ahead.append({**info.to_dict(), "pass": target})
        self.ahead = {}
        if run.excluded:  # neither rejected rows nor examples of a forgotten document
            self.rejected = [t for t in (without(t, run.excluded)[0] for t in self.rejected)
                             if t.num_rows]  # fmt: skip
        if self.rejected:  # the few chosen as examples keep their text apart (curate.examples)
            per_reason = max((m.context.examples for m in self.maps), default=0)
            chosen = candidates(self.rejected, per_reason)
            if chosen is not None:
                path = staging.examples(k, p, self.flushes)
                files.examples.append(
                    write_table(path, chosen, fsync=run.fsync, relative_to=staging.root).to_dict()
                )
        table = None
        if self.rejected and run.write_rejected:
            removed = [removed_rows(t).select(REJECTED_SCHEMA.names) for t in self.rejected]
            table = pa.concat_tables(removed).cast(REJECTED_SCHEMA)
        if table is not None and table.num_rows:
            path = staging.rejected(k, p, self.flushes)
            files.rejected.append(
                write_table(path, table, fsync=run.fsync, relative_to=staging.root).to_dict()
            )
        if self.quarantined:
            shown, unlisted = listed(self.quarantined, run.excluded_lines)  # (curate.forget)
            if shown:
                path = staging.quarantine(k, p, self.flushes)
                table = quarantine_table(shown)
                files.quarantine.append(
                    write_table(path, table, fsync=run.fsync, relative_to=staging.root).to_dict()
                )
            self.record.unlisted += unlisted
            self.record.quarantined += len(self.quarantined)
            tally(self.record, self.quarantined)
            self.record.quarantined_bytes += sum(q.nbytes for q in self.quarantined)
        self.rejected, self.quarantined = [], []
        self.flushes += 1

    def _store_counts(self) -> None:
        """Into the record, as they would read back from its JSON (seconds rounded)."""
        stages = self.record.stages
        if self.previous is not None:
            stages[self.task.previous_position] = _snapshot(self.prev_counts)
        for pos, c in self.counts.items():
            stages[pos] = _snapshot(c)

    def _checkpoint_path(self) -> Path:
        return self.task.staging.checkpoint(self.task.pass_index, self.part.key)

    def _checkpoint(self) -> None:
        files = self.record.files
        if self.writer is not None:
            files.shards += self.writer.take()
            files.lineage += self.writer.take_lineage()
        elif self.segments is not None:
            files.segments = list(self.segments.segments)
        self._flush_side_outputs()
        self._store_counts()
        state = Checkpoint(self.record, self.consumed, self.flushes)
        before = self._packer_file
        if self.writer is not None and self.writer.packers:
            # A new file per checkpoint, named by it: the checkpoint on disk keeps naming the
            # previous one, intact, until the new checkpoint replaces it (a crash between the
            # two, in this worker or another, must not pair old counts with newer rows).
            path = self.task.staging.packer(self.task.pass_index, self.part.key, self.flushes)
            _write_file(path, pickle.dumps(self.writer.state()), self.settings.fsync)
            state.packer = self._packer_file = path.name
            mark("checkpoint")  # a crash test may cut the power between the two files
        write_json(self._checkpoint_path(), state.to_json(), self.settings.fsync)
        if before is not None and before != self._packer_file:
            (self.out_dir / before).unlink(missing_ok=True)

    def _resume(self) -> dict[str, Any] | None:
        """Continue from this partition's checkpoint when every file it names is intact;
        returns the packers' carried rows, if any, for the shard output to restore."""
        state = resumable(self.task.staging, self.task.pass_index, self.part.key)
        if state is None or (state.record.rows_from or {}).get("entry"):
            return None  # (a replay from the stage cache starts over: it costs little)
        if (state.record.cache or {}).get("by_document"):
            return None  # (its counts are settled at the end: it starts over too)
        packers = None
        if state.packer is not None and self.task.final and self.settings.packing is not None:
            packer = self.task.staging.packer(self.task.pass_index, self.part.key, state.flushes)
            if state.packer != packer.name or not packer.is_file():
                return None  # not the file this checkpoint wrote: the partition starts over
            packers = pickle.loads(packer.read_bytes())
            self._packer_file = packer.name
        self.record = state.record
        self.record.read = 0  # recounted while the done chunks are read past
        self.consumed, self.flushes = state.consumed, state.flushes
        for pos, c in self.record.stages.items():
            if pos == self.task.previous_position:
                self.prev_counts = _snapshot(c)
            else:
                self.counts[pos] = _snapshot(c)
        log.info("partition %s pass %d: resuming after %d chunks", self._where(),
                 self.task.pass_index, self.consumed)  # fmt: skip
        return packers


def _write_file(path: Path, data: bytes, fsync: bool) -> None:
    with open(path, "wb") as f:
        f.write(data)
        if fsync:
            f.flush()
            os.fsync(f.fileno())


def _holds_excluded(batch: pa.RecordBatch | None, excluded: tuple[str, ...]) -> bool:
    return bool(excluded) and batch is not None and bool(without(batch, excluded)[1])


def _rows(batch: pa.RecordBatch | None) -> int:
    return batch.num_rows if batch is not None else 0


def _no_seconds(counts: StageCounts) -> StageCounts:
    """A reused stage's counts: what it did, in no time of this run's."""
    counts.seconds = 0.0
    return counts


def _snapshot(counts: StageCounts) -> StageCounts:
    return StageCounts.from_dict(counts.to_dict())


@dataclass
class Drops:
    """The previous barrier's decision for one partition: which ids go, and why."""

    ids: pa.Array
    rows: pa.Table  # REJECTED_SCHEMA rows, for the rejected/ side output
    changes: pa.Table | None = None  # rows for the kept documents it changes (`keeping`)

    def reasons_in(self, batch: pa.RecordBatch, kept: pa.RecordBatch, name: str) -> Counter[str]:
        """Reasons of the rows this batch lost; ids must be unique for the join to be exact."""
        hit = self.rows.filter(pc.is_in(self.rows.column(ID), value_set=batch.column(ID)))
        if hit.num_rows != batch.num_rows - kept.num_rows:
            counts = pc.value_counts(batch.column(ID))
            repeated = counts.filter(pc.greater(counts.field("counts"), 1))
            example = repeated[0]["values"].as_py() if len(repeated) else "?"
            raise CurateError(
                f"{name}: document id {example!r} is not unique, so a decision made for one "
                "document would drop another; name a unique id_field, or leave it out to "
                "derive ids from file and line"
            )
        return Counter(hit.column("reason").to_pylist())


def _drops(task: PassTask) -> Drops | None:
    if task.previous is None:
        return None
    return read_drops(task.staging, task.pass_index - 1, task.partition.key, task.previous)


def read_drops(staging: Staging, k: int, partition: str, barrier: BarrierStage) -> Drops:
    """Barrier k's decision for one partition (its staged decision file)."""
    path = staging.decision(k, partition)
    if not path.exists():
        return Drops(pa.array([], pa.string()), REJECTED_SCHEMA.empty_table())
    table = read_stream(path)
    changes = None
    if _changes(barrier):
        changes = keeping(table).select([ID, *(f.name for f in barrier.decision_fields)])
        table = dropping(table)
    rows = table.select(REJECTED_SCHEMA.names).cast(REJECTED_SCHEMA)
    return Drops(table.column(ID).combine_chunks(), rows, changes)


def _changes(barrier: BarrierStage | None) -> bool:
    return barrier is not None and barrier.changes_rows()

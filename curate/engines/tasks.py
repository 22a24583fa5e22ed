"""The work of one partition in one pass, shared by every engine.

A pass reads a partition (from the inputs in the first pass, from the previous
pass's staged file after that), drops what the previous barrier decided, runs the
segment's fused map stages, and then either summarizes for the next barrier while
staging the surviving rows, or writes the final shards. It returns a small JSON
record (counts, timings, files and their checksums) that is both the partition's
completion marker and its fragment of the manifest.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate.errors import CurateError
from curate.io.batches import ID, FieldSpec, QuarantineRecord, quarantine_table
from curate.io.packing import PackSpec
from curate.io.partitions import Partition
from curate.io.readers import read_partition
from curate.io.shards import ShardWriter, read_stream, write_table
from curate.stages.base import (
    ORDER,
    REJECTED_SCHEMA,
    BarrierStage,
    MapStage,
    Stage,
    StageCounts,
)

ORDER_SHIFT = 40
"""`_order` = partition << 40 | row: a trillion rows per partition, a million partitions."""

_READY: dict[str, Stage] = {}


S = TypeVar("S", bound=Stage)


def ready(stage: S) -> S:
    """The stage with `setup()` done, once per worker process for equal stage configurations.

    Equal means the same class, parameters, context and software (a tokenizer's file
    digests are in its software: a tokenizer edited on disk is loaded again).
    """
    key = (
        f"{type(stage).__module__}.{type(stage).__qualname__}:{stage.params.model_dump_json()}"
        f":{stage.context!r}:{sorted(stage.software().items())}"
    )
    cached = _READY.get(key)
    if cached is None:
        stage.setup()
        _READY[key] = cached = stage
    return cast(S, cached)


@dataclass
class PassTask:
    """Everything a worker needs to run one partition through one pass."""

    pass_index: int
    partition: Partition
    staging: Path
    maps: list[MapStage]
    positions: list[int]  # each map stage's position in the recipe
    fields: FieldSpec
    on_error: str
    previous: BarrierStage | None = None
    previous_position: int = -1
    barrier: BarrierStage | None = None
    final_schema: pa.Schema | None = None
    shard_bytes: int = 256 * 10**6
    fsync: bool = True
    file_mode: int = 0o640
    write_rejected: bool = True
    batch_bytes: int = 8 << 20
    extra: dict[str, Any] = field(default_factory=dict)
    packing: PackSpec | None = None

    @property
    def final(self) -> bool:
        return self.barrier is None


def pass_dir(staging: Path, pass_index: int) -> Path:
    return staging / f"pass-{pass_index}"


def record_path(staging: Path, pass_index: int, partition: int) -> Path:
    return pass_dir(staging, pass_index) / f"part-{partition:05d}.json"


def decision_path(staging: Path, pass_index: int, partition: int) -> Path:
    return pass_dir(staging, pass_index) / f"decision-{partition:05d}.arrow"


def _source_batches(task: PassTask, counts: dict[str, Any]) -> Any:
    """Batches entering this pass, each with the hidden `_order` column."""
    part = task.partition
    if task.pass_index == 0:
        row = 0
        quarantined: list[QuarantineRecord] = []
        for chunk in read_partition(
            part, task.fields, on_error=task.on_error, batch_bytes=task.batch_bytes
        ):
            quarantined.extend(chunk.quarantined)
            batch = chunk.batch
            n = batch.num_rows
            counts["read"] += n
            if n == 0:
                continue
            order = (np.uint64(part.index) << np.uint64(ORDER_SHIFT)) + np.arange(
                row, row + n, dtype=np.uint64
            )
            row += n
            yield batch.append_column(ORDER, pa.array(order, pa.uint64()))
        counts["quarantined"] = len(quarantined)
        counts["quarantined_bytes"] = sum(q.nbytes for q in quarantined)
        if quarantined:
            path = pass_dir(task.staging, 0) / f"quarantine-{part.index:05d}.arrow"
            info = write_table(
                path, quarantine_table(quarantined), fsync=task.fsync, relative_to=task.staging
            )
            counts["files"]["quarantine"] = info.to_dict()
        return
    source = pass_dir(task.staging, task.pass_index - 1) / f"data-{part.index:05d}.arrow"
    if source.exists():
        yield from read_stream(source).to_batches()


def run_pass_task(task: PassTask) -> dict[str, Any]:
    """Run one partition through one pass and write its completion record."""
    started = time.perf_counter()
    part = task.partition
    out_dir = pass_dir(task.staging, task.pass_index)
    out_dir.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {
        "partition": part.index,
        "pass": task.pass_index,
        "input": part.input.name,
        "read": 0,
        "quarantined": 0,
        "quarantined_bytes": 0,
        "stages": {},
        "files": {},
    }
    maps = [ready(s) for s in task.maps]  # same objects, set up once per worker
    counts = {pos: StageCounts() for pos in task.positions}
    previous = ready(task.previous) if task.previous is not None else None
    prev_counts = StageCounts()
    drops = _drops(task)
    rejected: list[pa.Table] = []

    writer: ShardWriter | None = None
    data_writer: pa.ipc.RecordBatchStreamWriter | None = None
    summary_writer: pa.ipc.RecordBatchFileWriter | None = None
    if task.final:
        assert task.final_schema is not None
        shards = task.staging / "out" / "shards"
        shards.mkdir(parents=True, exist_ok=True)
        writer = ShardWriter(
            shards, part.index, task.final_schema, task.shard_bytes,
            fsync=task.fsync, file_mode=task.file_mode, relative_to=task.staging,
        )  # fmt: skip
    packer = task.packing.start(part.index) if writer and task.packing else None

    for batch in _source_batches(task, record):
        if previous is not None and drops is not None:
            t = time.perf_counter()
            result = previous.apply(batch, drops.ids)
            prev_counts.docs_in += batch.num_rows
            prev_counts.docs_out += result.batch.num_rows
            if result.batch.num_rows < batch.num_rows:
                prev_counts.removed.update(drops.reasons_in(batch, result.batch, part.input.name))
            prev_counts.seconds += time.perf_counter() - t
            batch = result.batch
        for stage, pos in zip(maps, task.positions, strict=True):
            if batch.num_rows == 0:
                break
            t = time.perf_counter()
            result = stage.process(batch)
            c = counts[pos]
            c.docs_in += batch.num_rows
            c.docs_out += result.batch.num_rows
            c.changed += result.changed
            if result.counters:
                c.counters.update(result.counters)
            if result.removed is not None and result.removed.num_rows:
                c.removed.update(Counter(result.removed.column("reason").to_pylist()))
                rejected.append(result.removed)
            c.seconds += time.perf_counter() - t
            batch = result.batch
        if batch.num_rows == 0:
            continue
        if writer is not None:
            if packer is None:
                writer.write(batch.drop_columns([ORDER]))
            else:
                for rows, ended in packer.feed(batch.drop_columns([ORDER])):
                    writer.write(rows, documents=ended)
            continue
        assert task.barrier is not None
        if data_writer is None:
            data_writer = pa.ipc.new_stream(
                str(out_dir / f"data-{part.index:05d}.arrow"), batch.schema
            )
        data_writer.write_batch(batch)
        summary = task.barrier.summarize(batch)
        if summary_writer is None:
            summary_writer = pa.ipc.new_file(
                str(out_dir / f"summary-{part.index:05d}.arrow"), summary.schema
            )
        summary_writer.write_batch(summary)

    if writer is not None:
        for rows, ended in packer.flush() if packer is not None else ():
            writer.write(rows, documents=ended)
        record["files"]["shards"] = [s.to_dict() for s in writer.close()]
    for w in (data_writer, summary_writer):
        if w is not None:
            w.close()
    if drops is not None and len(drops.ids):
        rejected.insert(0, drops.rows)
    if rejected and task.write_rejected:
        table = pa.concat_tables(rejected).cast(REJECTED_SCHEMA)
        path = out_dir / f"rejected-{part.index:05d}.arrow"
        info = write_table(path, table, fsync=task.fsync, relative_to=task.staging)
        record["files"]["rejected"] = info.to_dict()
    if previous is not None:
        record["stages"][str(task.previous_position)] = prev_counts.to_dict()
    for pos, c in counts.items():
        record["stages"][str(pos)] = c.to_dict()
    record["seconds"] = round(time.perf_counter() - started, 4)
    _write_record(record_path(task.staging, task.pass_index, part.index), record, task.fsync)
    return record


@dataclass
class Drops:
    """The previous barrier's decision for one partition: which ids go, and why."""

    ids: pa.Array
    rows: pa.Table  # REJECTED_SCHEMA rows, for the rejected/ side output

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
    path = decision_path(task.staging, task.pass_index - 1, task.partition.index)
    if not path.exists():
        return Drops(pa.array([], pa.string()), REJECTED_SCHEMA.empty_table())
    table = read_stream(path)
    rows = table.select(REJECTED_SCHEMA.names).cast(REJECTED_SCHEMA)
    return Drops(table.column(ID).combine_chunks(), rows)


def _write_record(path: Path, record: dict[str, Any], fsync: bool) -> None:
    """Atomically, so a record on disk always describes files that are complete."""
    tmp = path.with_suffix(".json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1, sort_keys=True)
        f.flush()
        if fsync:
            os.fsync(f.fileno())
    os.replace(tmp, path)

"""What every engine does the same way around a barrier: find completed partitions, make the
decision once (with the engine's own collective operations), and split it by partition.

An engine supplies only how its summaries are held (`make_summaries`); the marker files,
the unique-id check and the decision files are the same on every engine, which is what lets
a run interrupted on one engine resume on another.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from curate.cache import decisions
from curate.collective.frame import Frame, Summaries
from curate.collective.piece_ops import column_sum
from curate.engines.job import Job, ProgressFn
from curate.engines.tasks import PassTask
from curate.errors import CurateError
from curate.io.batches import ORDER, local_orders, partition_of
from curate.io.partitions import Partition
from curate.output.shards import write_table
from curate.phases import mark
from curate.progress import Work, report, steps_to
from curate.stages.base import DECISION_SCHEMA, BarrierStage
from curate.staging.names import Staging
from curate.staging.record import PartitionRecord, completed

log = logging.getLogger(__name__)


def split_completed(
    tasks: list[PassTask], phase: str
) -> tuple[dict[str, PartitionRecord], list[PassTask]]:
    """Records of the partitions a previous run completed (by key), and the tasks still to run."""
    records: dict[str, PartitionRecord] = {}
    todo = []
    for task in tasks:
        done = completed(task.staging, task.pass_index, task.partition.key)
        if done is not None:
            records[task.partition.key] = done
        else:
            todo.append(task)
    if records:
        log.info("%s: reusing %d completed partitions", phase, len(records))
    return records, todo


def summary_files(
    staging: Staging, partitions: list[Partition], records: list[PartitionRecord]
) -> list[tuple[Path, int]]:
    """The summary files the pass's records (one per partition, in plan order) name, with
    their partition's index in this run: exactly the completed ones, whatever else a killed
    attempt left in the folder."""
    return [
        (staging.root / seg["summary"]["path"], part.index)
        for part, r in zip(partitions, records, strict=True)
        for seg in r.files.segments
    ]


def decide_once(
    job: Job,
    k: int,
    barrier: BarrierStage,
    make_summaries: Callable[[], Summaries],
    progress: ProgressFn,
    rows: int | None = None,
) -> dict[str, Any]:
    """The barrier's decision for pass k, made once (a resumed run finds the marker).

    The decision stays with the engine: its pieces are written to one file per partition
    where they are (Ray's workers, or this process), and only their row counts come back.
    Progress goes by steps (`DECIDE_STEPS`: the ids checked, the decision, its files), and
    within the decision by the notes the barrier gives (`curate.progress.step`); `rows` is
    the number of summaries, when the caller knows it.
    """
    marker = job.staging.decided(k)
    if marker.exists():
        info: dict[str, Any] = json.loads(marker.read_text())
        return info
    steps = _Steps(progress, f"{barrier.name}: deciding")
    steps.at(0, f"ids of {rows:,} summaries" if rows is not None else "ids")
    mark("barrier")
    started = time.perf_counter()
    key = decisions.decision_key(job, k, barrier)
    kept = decisions.restore(job, k, key) if key is not None else None
    if kept is not None:  # the same rows in every partition, the same barrier: as decided
        kept["seconds"] = round(time.perf_counter() - started, 4)
        marker.write_text(json.dumps(kept))
        steps.at(DECIDE_STEPS, "from the stage cache")
        return kept
    summaries = make_summaries()
    try:
        repeated = summaries.repeated_id()
        if repeated is not None:
            raise CurateError(
                f"document id {repeated!r} is not unique, so {barrier.name} could not tell "
                "the documents apart; name a unique id_field, or leave it out to derive ids "
                "from file and line"
            )
        mark("decide")  # crash tests kill here: every summary read, nothing decided
        steps.at(1, "deciding")
        with steps_to(partial(steps.at, 1)):
            decision, stats = barrier.decide_with_stats(summaries)
        steps.at(2, "decision files")
        for stale in job.staging.decisions(k):
            stale.unlink()
        keys = [part.key for part in job.partitions]
        schema = barrier.decision_schema()
        dropped, changed = write_decision(
            decision, job.staging.root, k, keys, job.settings.fsync, schema
        )
        mark("decide")  # and here: the decision files written, neither cached nor marked done
        info = {
            "summary_rows": summaries.count(),
            "dropped": dropped,
            **({"changed": changed} if barrier.changes_rows() else {}),
            "seconds": round(time.perf_counter() - started, 4),
            # what deciding learned (clusters, pairs): kept here so a resumed run that
            # skips the decision still reports it; describe() after the decision, as a
            # barrier that keeps what it learned on itself has always reported it
            "details": {**barrier.describe(), **stats},
        }
    finally:
        summaries.close()
    if key is not None:
        decisions.keep(job, k, key, info)
    marker.write_text(json.dumps(info))
    steps.at(DECIDE_STEPS, f"{dropped:,} to drop")
    return info


DECIDE_STEPS = 3
"""A decision's steps as progress counts them: the ids checked, the decision, its files."""


class _Steps:
    """A decision's progress: the step it is on and a note (the barrier's own step in
    `decide`), reported to renderers that take notes, as `done/total` to others."""

    def __init__(self, progress: ProgressFn, phase: str) -> None:
        self.progress, self.phase = progress, phase

    def at(self, done: int, note: str) -> None:
        report(self.progress, self.phase, done, DECIDE_STEPS, Work(note=note))


def write_decision(
    decision: Frame,
    staging: Path,
    k: int,
    keys: list[str],
    fsync: bool,
    schema: pa.Schema = DECISION_SCHEMA,
) -> tuple[int, int]:
    """One decision file per partition (`Staging.decision`, named by its key: `keys` holds
    each partition's, by index in this run) in the staging folder `staging`, so each worker
    reads only the drops that concern it; written by whoever holds each piece, as `schema`
    (the barrier's `decision_schema`). Returns the rows written that drop a document, and
    those that change one (a barrier with `decision_fields`)."""
    written = decision.by_partition(
        ORDER, write_pieces, staging, k, fsync, schema, side=partial(_keys_between, keys)
    )
    rows = int(sum(written.fold(column_sum, "rows")))
    dropped = int(sum(written.fold(column_sum, "dropped")))
    return dropped, rows - dropped


def _keys_between(keys: list[str], lo: int, hi: int) -> list[str]:
    return keys[lo:hi]


def write_pieces(
    decision: pa.Table,
    span: tuple[int, int],
    keys: list[str],
    staging: Path,
    k: int,
    fsync: bool,
    schema: pa.Schema = DECISION_SCHEMA,
) -> pa.Table:
    """The decision files of the partitions this piece covers, `span` (their keys: `keys`)
    (pure: the same rows give the same files, so a task run twice writes them twice,
    identically): rows and dropping rows written per partition."""
    if decision.num_rows == 0:
        return pa.table({"rows": pa.array([], pa.int64()), "dropped": pa.array([], pa.int64())})
    decision = decision.sort_by(ORDER).cast(schema).combine_chunks()
    reasons = decision.column("reason").is_valid().to_numpy(zero_copy_only=False)
    parts = partition_of(decision.column(ORDER).to_numpy())
    starts = np.concatenate([[0], np.flatnonzero(np.diff(parts)) + 1])
    ends = np.concatenate([starts[1:], [len(parts)]])
    rows, dropped = [], []
    for start, end in zip(starts, ends, strict=True):
        # a fresh copy: buffers sized by the rows alone, not by how this piece was built
        # (a concatenation pads them), so the files are the same bytes on every engine
        piece = local_orders(decision.take(pa.array(np.arange(start, end))))
        key = keys[int(parts[start]) - span[0]]
        write_table(Staging(staging).decision(k, key), piece, fsync=fsync)
        rows.append(int(end - start))
        dropped.append(int(reasons[start:end].sum()))
    return pa.table({"rows": pa.array(rows, pa.int64()), "dropped": pa.array(dropped, pa.int64())})

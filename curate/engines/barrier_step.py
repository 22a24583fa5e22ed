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
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from curate.engines.collective import Summaries
from curate.engines.job import Job, ProgressFn
from curate.engines.tasks import (
    ORDER_SHIFT,
    PassTask,
    decision_path,
    files_intact,
    pass_dir,
    record_path,
)
from curate.errors import CurateError
from curate.io.shards import write_table
from curate.phases import mark
from curate.stages.base import ORDER, BarrierStage

log = logging.getLogger(__name__)


def completed(task: PassTask) -> dict[str, Any] | None:
    """The partition's record when a previous run finished it and its files are intact."""
    path = record_path(task.staging, task.pass_index, task.partition.index)
    if not path.exists():
        return None
    record: dict[str, Any] = json.loads(path.read_text())
    return record if files_intact(task.staging, record["files"]) else None


def split_completed(
    tasks: list[PassTask], phase: str
) -> tuple[dict[int, dict[str, Any]], list[PassTask]]:
    """Records of the partitions a previous run completed, and the tasks still to run."""
    records: dict[int, dict[str, Any]] = {}
    todo = []
    for task in tasks:
        done = completed(task)
        if done is not None:
            records[task.partition.index] = done
        else:
            todo.append(task)
    if records:
        log.info("%s: reusing %d completed partitions", phase, len(records))
    return records, todo


def summary_files(staging: Path, records: list[dict[str, Any]]) -> list[tuple[Path, int]]:
    """The summary files the pass's records name, with their partition: exactly the completed
    ones, whatever else a killed attempt left in the folder."""
    return [
        (staging / seg["summary"]["path"], int(r["partition"]))
        for r in records
        for seg in r["files"].get("segments", [])
    ]


def decide_once(
    job: Job,
    k: int,
    barrier: BarrierStage,
    make_summaries: Callable[[], Summaries],
    progress: ProgressFn,
) -> dict[str, Any]:
    """The barrier's decision for pass k, made once (a resumed run finds the marker)."""
    folder = pass_dir(job.staging, k)
    marker = folder / "decision.json"
    if marker.exists():
        info: dict[str, Any] = json.loads(marker.read_text())
        return info
    progress(f"{barrier.name}: deciding", 0, 1)
    mark("barrier")
    started = time.perf_counter()
    summaries = make_summaries()
    repeated = summaries.repeated_id()
    if repeated is not None:
        raise CurateError(
            f"document id {repeated!r} is not unique, so {barrier.name} could not tell the "
            "documents apart; name a unique id_field, or leave it out to derive ids from "
            "file and line"
        )
    decision = barrier.decide(summaries)
    for stale in folder.glob("decision-*.arrow"):
        stale.unlink()
    write_decision(decision, job.staging, k, job.fsync)
    info = {
        "summary_rows": summaries.count(),
        "dropped": decision.num_rows,
        "seconds": round(time.perf_counter() - started, 4),
        # what decide() learned (clusters, pairs): kept here so a resumed run that skips
        # the decision still reports it
        "details": barrier.describe(),
    }
    marker.write_text(json.dumps(info))
    progress(f"{barrier.name}: deciding", 1, 1)
    return info


def write_decision(decision: pa.Table, staging: Path, k: int, fsync: bool) -> None:
    """One decision file per partition, so each worker reads only the drops that concern it."""
    if decision.num_rows == 0:
        return
    decision = decision.sort_by(ORDER)
    parts = decision.column(ORDER).to_numpy() >> np.uint64(ORDER_SHIFT)
    starts = np.concatenate([[0], np.flatnonzero(np.diff(parts)) + 1])
    ends = np.concatenate([starts[1:], [len(parts)]])
    for start, end in zip(starts, ends, strict=True):
        piece = decision.slice(int(start), int(end - start))
        write_table(decision_path(staging, k, int(parts[start])), piece, fsync=fsync)

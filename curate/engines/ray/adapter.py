"""The thin adapter between Ray Data and curate's work: one partition through one pass.

Ray Data's `map_batches` hands the adapter rows that each carry a `PassTask`; the adapter
runs it with `run_pass_task`, the same function the local engine calls, so the stage
objects, the shard writer and the completion record are exactly the local engine's. It
knows nothing of any stage.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pyarrow as pa

from curate.engines.ray.placement import note
from curate.engines.tasks import PassTask, run_pass_task
from curate.errors import CurateError

ATTEMPTS = 4
"""Runs of one partition in one pass before the run fails. Ray Data retries a task whose
worker died (killed, lost with its node) without limit; a partition that kills its worker
every time (out of memory, a crash in a stage's library) must stop the run instead."""


def items(tasks: list[PassTask]) -> list[dict[str, object]]:
    """The rows of the Ray dataset of a pass: each task pickled (stage objects stay small)."""
    return [{"partition": t.partition.key, "task": pickle.dumps(t)} for t in tasks]


def run_partitions(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Ray Data UDF: run each row's task; return its partition key and record (JSON).

    A user's error (a `CurateError`: bad input with `on_error: fail`, a full disk) comes
    back as a row, pickled, for the driver to raise as it is: raised here, Ray Data would
    wrap it and lose its type and message on the way.
    """
    # One task per CPU already: keep Arrow's own pools from oversubscribing (as local does).
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    partitions, records, errors = [], [], []
    for blob in batch["task"]:
        task: PassTask = pickle.loads(blob)
        partitions.append(task.partition.key)
        try:
            _count_attempt(task)
            note(task.staging.nodes, "partition")
            records.append(json.dumps(run_pass_task(task).to_json()))
            errors.append(b"")
        except CurateError as exc:
            records.append("")
            errors.append(_pickled(exc))
    return {
        "partition": np.array(partitions, dtype=object),
        "record": np.array(records, dtype=object),
        "error": np.array(errors, dtype=object),
    }


def _pickled(exc: CurateError) -> bytes:
    try:
        blob = pickle.dumps(exc)
        pickle.loads(blob)
        return blob
    except Exception:  # a subclass that does not pickle: its message is what matters
        return pickle.dumps(CurateError(str(exc)))


def attempts_path(task: PassTask) -> Path:
    return task.staging.attempts(task.pass_index, task.partition.key)


def _count_attempt(task: PassTask) -> None:
    path = attempts_path(task)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = int(path.read_text() or 0) + 1 if path.exists() else 1
    if n > ATTEMPTS:
        raise CurateError(
            f"partition {task.partition.key} of {task.partition.input.name} (pass "
            f"{task.pass_index + 1}) lost its worker {ATTEMPTS} times; out of memory? "
            "Lower partition_size, or give workers more memory"
        )
    path.write_text(str(n))


def user_error(exc: BaseException) -> CurateError | None:
    """The CurateError inside a Ray error, as a plain one (one line for the user), if any."""
    seen: set[int] = set()
    stack: list[BaseException] = [exc]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        cause = getattr(e, "cause", None)
        if isinstance(e, CurateError) and not isinstance(cause, BaseException):
            return CurateError(*e.args)
        stack += [c for c in (cause, e.__cause__, e.__context__) if isinstance(c, BaseException)]
    return None

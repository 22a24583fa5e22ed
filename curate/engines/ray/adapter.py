"""The thin adapter between Ray and curate's work: one partition through one pass, as a task.

Each partition of a pass is one Ray task that gets its `PassTask` pickled (by value: stage
objects stay small, so the bytes ride in the task's own message) and runs it with
`run_pass_task`, the same function the local engine calls, so the stage objects, the shard
writer and the completion record are exactly the local engine's. It knows nothing of any
stage.

Plain tasks, not Ray Data: a `map_batches` over the partitions cost ~9 s of fixed time per
pass on a trivial pass with the cluster up (`benchmarks/ray_overhead.py`): the driver and
every worker import `ray.data` (0.8 s each), each run starts Ray Data's three helper actors
(a Python process each), and each pass starts a streaming executor. A partition is already
the unit of work and its result is a small record, which is what plain tasks are for.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from curate.engines import memo_exchange
from curate.engines.ray.placement import note
from curate.engines.tasks import PassTask, ready, run_pass_task
from curate.errors import CurateError

log = logging.getLogger(__name__)

ATTEMPTS = 4
"""Runs of one partition in one pass before the run fails. Ray retries a task whose worker
died (killed, lost with its node), here without limit; a partition that kills its worker
every time (out of memory, a crash in a stage's library) must stop the run instead."""


def run_partition(blob: bytes, learnt: Sequence[Any] = ()) -> tuple[tuple[str, bytes], bytes]:
    """Run one pickled task: its record (JSON), or a user's error, pickled; and what its
    stages learnt (the worker's pid, then `memo_exchange.packed_news`; b"" when nothing).

    A user's error (a `CurateError`: bad input with `on_error: fail`, a full disk) comes
    back as a value, pickled, for the driver to raise as it is: raised here, Ray would
    wrap it and lose its type and message on the way.

    `learnt` holds the object refs of what earlier tasks of the run told (the driver's list,
    `RayEngine.run_tasks`): those this worker has not taken in yet are fetched in one call
    and handed to its stages first, as the local engine's forked workers read each other's
    log (`memo_exchange`). A fetch that fails leaves the memos as they are; no output can
    change either way.
    """
    # One task per CPU already: keep Arrow's own pools from oversubscribing (as local does).
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    task: PassTask = pickle.loads(blob)
    _take_in(learnt)
    try:
        _count_attempt(task)
        note(task.staging.nodes, "partition")
        result = json.dumps(run_pass_task(task).to_json()), b""
    except CurateError as exc:
        return ("", _pickled(exc)), b""
    return result, _told()


_PID = struct.Struct("<Q")  # a news object's writer, before its pickle
_TAKEN: set[str] = set()
"""The news objects this worker has taken in (or told), by object id."""


def _take_in(refs: Sequence[Any]) -> None:
    pending = [ref for ref in refs if ref.hex() not in _TAKEN]
    if not pending:
        return
    import ray

    try:
        blobs = ray.get(list(pending))
        me = os.getpid()
        for ref, blob in zip(pending, blobs, strict=True):
            _TAKEN.add(ref.hex())
            pid = _PID.unpack_from(blob)[0] if blob else me
            if pid != me:  # its own: known here already
                memo_exchange.learn_packed(memoryview(blob)[_PID.size :], f"Ray worker {pid}")
    except Exception as exc:  # sharing is an optimisation: never a reason to fail
        log.debug("memos not taken in: %s: %s", type(exc).__name__, exc)


def _told() -> bytes:
    try:
        payload = memo_exchange.packed_news()
        return _PID.pack(os.getpid()) + payload if payload else b""
    except Exception as exc:
        log.debug("memos not told: %s: %s", type(exc).__name__, exc)
        return b""


def first() -> None:
    """A run's first task, which the warm-ups wait for (`RayEngine.start`): it only needs a
    worker, and the import of this module it brings (curate's task code, pyarrow)."""


def warm(stages: bytes | None, first: None) -> None:
    """Started once per task slot when the engine connects: a new driver's Ray workers are
    new processes, and this has them import curate's task code (and pandas, which pyarrow
    imports on first use) while the driver plans, not when the first pass starts. pandas
    cannot be left out (~0.3 CPU-s a worker): pyarrow 26 imports it from C++ on a process's
    first `to_numpy()` and first conversion that infers a type (`pc.add(col, 1)`), and
    keeps a failed attempt for good (pandas' NA, NaT and DateOffset then fail to convert
    in that process even after pandas is imported), so it is paid here, off the pass. With
    `stages` (pickled), also set up the stages whose setup the local engine's forked
    workers inherit from the driver (Presidio: ~1.4 CPU-s), as `tasks.ready` keeps them
    for the tasks to come. A stage that fails here is left for its task to fail with.
    `first` is the first task's result (None), which Ray waits for before asking for a
    worker for this one."""
    import contextlib

    with contextlib.suppress(ImportError):
        import pandas  # noqa: F401
    if stages is None:
        return
    with contextlib.suppress(Exception):
        for stage in pickle.loads(stages):
            ready(stage)


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

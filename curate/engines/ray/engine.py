"""The Ray engine: the local engine's partitions and passes, scheduled on a Ray cluster.

Each pass is one Ray task per partition that has no completion record yet (at most
`workers` at once); a worker runs a partition with `run_pass_task` and writes its shards,
staged data, summaries and record to the staging folder, which must be on a filesystem
every node mounts. A barrier's decision runs as Ray tasks against `RaySummaries`: every
step, down to the per-partition decision files, happens where the rows are, and the driver
holds object references and counts. Completion checks, the decision marker and the decision files'
names are `barrier_step`'s, the same as the local engine's, so a run interrupted on one
engine resumes on the other. Accounting and publishing stay with the build
(`curate.build.Build`), as for every engine.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import threading
from collections.abc import Sequence
from typing import Any

import ray

from curate.collective.frame import Summaries
from curate.engines.barrier_step import summary_files
from curate.engines.base import Engine
from curate.engines.job import Job, ProgressFn
from curate.engines.ray.adapter import attempts_path, first, run_partition, user_error, warm
from curate.engines.ray.collective import RaySummaries
from curate.engines.ray.connect import init, start_local
from curate.engines.ray.placement import tally
from curate.engines.tasks import PassTask
from curate.stages.base import Stage
from curate.staging.record import PartitionRecord

log = logging.getLogger(__name__)


_partition = ray.remote(num_cpus=1, max_retries=-1, num_returns=2)(run_partition)
"""A pass's task over one partition: its record, and what its stages learnt. Retried without
limit when its worker dies; the attempts file (`adapter.ATTEMPTS`) stops a partition that
kills its worker every time."""
TOLD = 2048
"""What finished tasks told (`run_partition`), by object ref, handed to every later task of
the pass; past this many the rest keep what they learn to themselves (each task's message
carries the list)."""
_warm = ray.remote(num_cpus=1)(warm)
_first = ray.remote(num_cpus=1)(first)

WAIT_SECONDS = 0.25
"""The driver wakes at least this often while tasks run: Python runs a Ctrl-C's handler
only once the main thread does."""

_disconnecting: threading.Thread | None = None
"""The thread running the last `ray.shutdown()` this process started (`RayEngine.close`)."""


def _disconnect_meanwhile() -> None:
    """`ray.shutdown()` in a thread of its own. A driver's shutdown waits ~0.3 s for its core
    worker to send the GCS its last task events (RAY_task_events_shutdown_flush_timeout_ms;
    0.03 CPU-s). The engine closes after its last pass, and the build publishes meanwhile;
    the build closes the engine again once it has published, which waits for the thread, so
    the caller gets Ray shut down as before."""
    global _disconnecting
    _disconnecting = threading.Thread(target=ray.shutdown, name="curate-ray-shutdown")
    _disconnecting.start()


def _disconnected() -> None:
    if _disconnecting is not None:
        _disconnecting.join()


class RayEngine(Engine):
    kind = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        self.address = address
        self.workers = workers  # tasks at once; default: every CPU of the cluster
        self._owns_ray = False
        self._warmed = False  # warm-ups submitted (once per connection)
        self._first: ray.ObjectRef | None = None  # the run's first task (`start`)
        self._warming: list[ray.ObjectRef] = []  # first warm-ups no pass has waited for yet
        self._setting_up: list[ray.ObjectRef] = []  # `set_up_in_workers`' tasks
        self._set_up: bytes | None = None  # stages each worker sets up as it starts

    def set_up_in_workers(self, stages: Sequence[Stage]) -> None:
        """Have each worker set these stages up now, as the local engine's workers inherit
        them set up from the driver (`curate.fork_setup`): in the warm-up tasks `start()`
        submits, or, once started, in one more task per slot (queued behind them, so on the
        same workers, as far as Ray keeps to them: it is a head start, not a guarantee)."""
        self._set_up = pickle.dumps(list(stages)) if stages else None
        if self._warmed and self._set_up is not None:
            self._setting_up = self._warm(self._set_up)

    def start(self) -> None:
        """Connect to the cluster at `address` (or "auto"), or start one on this machine,
        and have a worker per task slot start now (`adapter.warm`), while the build plans.

        One task goes first (`adapter.first`); the warm-ups ask for their workers once it
        ran, and the pass's tasks once the warm-ups ended (`run_tasks`). Ray's raylet answers
        the first request for a worker of a new job with two processes (one it "prestarts"
        for the request's backlog, besides the one it starts for the request), and a request
        that arrives while they boot starts one more process, which then sits idle: three
        Python workers for two slots, where the third's start-up (~0.6 CPU-s, Ray's own) ran
        beside the other two's on the benchmark's two cores, in the middle of a trivial
        pass (`benchmarks/ray_overhead.py`). Asked for once the first task ran, the
        warm-ups usually find both processes up and idle.

        A Ray session the caller already started (`ray.init` in a notebook or a test) is
        used as it is and left running.
        """
        _disconnected()  # a previous build's shutdown, still running
        if not ray.is_initialized():
            if self.address is None and not os.environ.get("RAY_ADDRESS"):
                start_local(num_cpus=self.workers, log_to_driver=False)  # ours, on loopback
            else:
                init(self.address, include_dashboard=False, log_to_driver=False)
            self._owns_ray = True
        if not self._warmed:
            self._first = _first.options(scheduling_strategy="SPREAD").remote()
            self._warming = self._warm(self._set_up)
            self._warmed = True

    def _warm(self, stages: bytes | None) -> list[ray.ObjectRef]:
        slots = self.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        spread = _warm.options(scheduling_strategy="SPREAD")
        return [spread.remote(stages, self._first) for _ in range(slots)]

    def close(self) -> None:
        self._warming = []
        self._setting_up = []
        self._first = None
        self._warmed = False
        if self._owns_ray and ray.is_initialized():
            _disconnect_meanwhile()  # waited for by the next close (`Build` closes twice)
        else:
            _disconnected()
        self._owns_ray = False

    def run_tasks(
        self,
        tasks: list[PassTask],
        records: dict[str, PartitionRecord],
        phase: str,
        total: int,
        progress: ProgressFn,
    ) -> None:
        """One task per partition, at most `workers` at once, spread over the nodes (by
        default Ray packs tasks onto the driver's node while others idle); records are
        kept by partition key as tasks finish, in whatever order. A first warm-up not yet
        ended holds its slot until the last task is submitted (see `start`); the stages'
        set-ups (`set_up_in_workers`) take their turn in Ray's queue as before. What a
        finished task's stages learnt (its second result) goes to every task started after
        it, which takes in what its worker has not (`adapter.run_partition`)."""
        for task in tasks:
            attempts_path(task).unlink(missing_ok=True)
        waiting = [pickle.dumps(t) for t in reversed(tasks)]
        limit = self.workers or len(tasks)
        running, self._warming = self._warming, []
        warm_ups = {ref.hex() for ref in running}
        told: list[Any] = []  # what finished tasks' stages learnt: later tasks take it in
        news_of: dict[str, Any] = {}  # a running task's record ref (hex) -> its news ref
        # a pass none of whose stages keeps memos to share hands on nothing: no task fetches
        learns = any(type(m).learnt is not Stage.learnt for t in tasks[:1] for m in t.maps)
        while waiting or running:
            while waiting and len(running) < limit:
                blob = waiting.pop()
                spread = _partition.options(scheduling_strategy="SPREAD")
                record_ref, news_ref = spread.remote(blob, list(told))
                news_of[record_ref.hex()] = news_ref
                running.append(record_ref)
            if not waiting:  # every task is in: the pass waits for its own, not the warm-ups
                running = [ref for ref in running if ref.hex() not in warm_ups]
                if not running:
                    break
            done, running = ray.wait(running, num_returns=1, timeout=WAIT_SECONDS)
            for ref in done:
                if ref.hex() in warm_ups:
                    continue  # its worker is free; a warm-up that failed leaves its task to fail
                record, error = ray.get(ref)
                if error:  # a user's error (bad input, full disk), as raised
                    raise pickle.loads(error)
                news = news_of.pop(ref.hex(), None)
                if learns and news is not None and len(told) < TOLD:
                    told.append(news)
                rec = PartitionRecord.from_json(json.loads(record))
                records[rec.partition] = rec
                progress(phase, len(records), total)

    def summaries(self, job: Job, k: int, records: list[PartitionRecord]) -> Summaries:
        files = summary_files(job.staging, job.partitions, records)
        return RaySummaries(files, markers=job.staging.nodes)

    def placement(self, job: Job) -> list[dict[str, Any]]:
        return tally(job.staging.nodes)

    def user_error(self, exc: Exception) -> BaseException | None:
        return user_error(exc)

"""The Ray engine: the local engine's partitions and passes, scheduled on a Ray cluster.

Each pass is a Ray Data `map_batches` over the partitions that have no completion record
yet; a worker runs a partition with `run_pass_task` and writes its shards, staged data,
summaries and record to the staging folder, which must be on a filesystem every node
mounts. A barrier's decision runs as Ray tasks against `RaySummaries`: every step, down to
the per-partition decision files, happens where the rows are, and the driver holds object
references and counts. Completion checks, the decision marker and the decision files'
names are `barrier_step`'s, the same as the local engine's, so a run interrupted on one
engine resumes on the other. Accounting and publishing stay with the build
(`curate.build.Build`), as for every engine.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
from typing import Any

import ray

from curate.collective.frame import Summaries
from curate.engines.barrier_step import summary_files
from curate.engines.base import Engine
from curate.engines.job import Job, ProgressFn
from curate.engines.ray.adapter import attempts_path, items, run_partitions, user_error
from curate.engines.ray.collective import RaySummaries
from curate.engines.ray.connect import init, start_local
from curate.engines.ray.placement import tally
from curate.engines.ray.settle import settle
from curate.engines.tasks import PassTask
from curate.staging.record import PartitionRecord

log = logging.getLogger(__name__)


class RayEngine(Engine):
    kind = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        self.address = address
        self.workers = workers  # tasks at once; default: every CPU of the cluster
        self._owns_ray = False

    def start(self) -> None:
        """Connect to the cluster at `address` (or "auto"), or start one on this machine.

        A Ray session the caller already started (`ray.init` in a notebook or a test) is
        used as it is and left running.
        """
        if ray.is_initialized():
            return
        if self.address is None and not os.environ.get("RAY_ADDRESS"):
            start_local(num_cpus=self.workers, log_to_driver=False)  # ours, on loopback
        else:
            init(self.address, include_dashboard=False, log_to_driver=False)
        self._owns_ray = True

    def close(self) -> None:
        if self._owns_ray and ray.is_initialized():
            settle()  # a Ray Data thread left running would end the process at shutdown
            ray.shutdown()
        self._owns_ray = False

    def begin(self, job: Job) -> None:
        self.start()
        import ray.data

        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False  # the CLI owns progress,
        logging.getLogger("ray.data").setLevel(logging.ERROR)  # and library code never prints

    def run_tasks(
        self,
        tasks: list[PassTask],
        records: dict[str, PartitionRecord],
        phase: str,
        total: int,
        progress: ProgressFn,
    ) -> None:
        import ray.data

        for task in tasks:
            attempts_path(task).unlink(missing_ok=True)
        rows = ray.data.from_items(items(tasks), override_num_blocks=len(tasks))
        ran = rows.map_batches(
            run_partitions,
            batch_size=1,
            compute=ray.data.TaskPoolStrategy(size=self.workers),
            num_cpus=1,
        )
        for row in ran.iter_rows():
            if row["error"]:  # a user's error (bad input, full disk), as raised
                raise pickle.loads(row["error"])
            records[str(row["partition"])] = PartitionRecord.from_json(json.loads(row["record"]))
            progress(phase, len(records), total)

    def summaries(self, job: Job, k: int, records: list[PartitionRecord]) -> Summaries:
        files = summary_files(job.staging, job.partitions, records)
        return RaySummaries(files, markers=job.staging.nodes)

    def placement(self, job: Job) -> list[dict[str, Any]]:
        return tally(job.staging.nodes)

    def user_error(self, exc: Exception) -> BaseException | None:
        return user_error(exc)

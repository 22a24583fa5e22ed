"""What an engine is: the pass loop every engine runs, and the few things one does its own way.

A run is a list of passes, one per segment of the plan. For each pass the engine runs the
partitions that have no intact completion record yet (`run_tasks`: in this process, in a
pool of processes, as Ray tasks), and, when the pass ends at a barrier, makes the barrier's
decision once against summaries held the engine's way (`summaries`). Which partitions are
done, the timings, the decision's marker and files are this loop's and `barrier_step`'s,
the same on every engine, which is what lets a run interrupted on one engine resume on
another. An engine also says how it starts, closes and stops at once (Ctrl-C), and may turn
an error its workers raised back into the user's error (`user_error`).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from functools import partial
from typing import Any, ClassVar

from curate.collective.frame import Summaries
from curate.engines.barrier_step import decide_once, split_completed
from curate.engines.job import Job, JobResult, ProgressFn, no_progress
from curate.engines.tasks import PassTask
from curate.engines.work_meter import PassWatch
from curate.io.partitions import Partition
from curate.staging.record import PartitionRecord, segment_rows


class Engine(ABC):
    kind: ClassVar[str]
    workers: int | None
    """Partitions run at once (None: the engine's default, such as every CPU of a cluster)."""

    @abstractmethod
    def start(self) -> None:
        """Get the workers ready (the build calls it early, so they boot while it plans)."""

    @abstractmethod
    def close(self) -> None:
        """Release the workers once the run is over (called again by the build: idempotent)."""

    def terminate(self) -> None:
        """Stop the workers now, mid-task (Ctrl-C); completion records and checkpoints are
        written atomically after the files they name, so the next run resumes from them.
        By default nothing more happens than the `close()` that follows."""
        return None

    def runs_elsewhere(self) -> bool:
        """Whether, once started, the passes run outside this process (worker processes, a
        cluster), so this process idles while they run. True but for the local engine
        running partitions in this process."""
        return True

    def begin(self, job: Job) -> None:
        """Called once before the first pass."""
        self.start()

    @abstractmethod
    def run_tasks(
        self,
        tasks: list[PassTask],
        records: dict[str, PartitionRecord],
        phase: str,
        total: int,
        progress: ProgressFn,
    ) -> None:
        """Run each task (`tasks.run_pass_task`) and put its record in `records` under its
        partition's key, reporting progress(phase, len(records), total) as each completes."""

    @abstractmethod
    def summaries(self, job: Job, k: int, records: list[PartitionRecord]) -> Summaries:
        """The summaries pass k's records name, held the way this engine's collective
        operations work on them."""

    def placement(self, job: Job) -> list[dict[str, Any]]:
        """After the run: per node of a cluster, the tasks it ran (the manifest's
        `engine.nodes`); empty for an engine that runs on this machine alone."""
        return []

    def user_error(self, exc: Exception) -> BaseException | None:
        """The user's own error an engine's failure carries (bad input, full disk), if any."""
        return None

    def run(self, job: Job, progress: ProgressFn = no_progress) -> JobResult:
        """Every pass of the job, and every barrier's decision, in order."""
        self.begin(job)
        result = JobResult(records=[])
        try:
            for k, segment in enumerate(job.segments):
                t = time.perf_counter()
                previous = result.records[k - 1] if k else None
                result.records.append(self._run_pass(job, k, progress, previous))
                if job.cache is not None:
                    job.cache.remember(k, result.records[k])
                result.timings[f"pass_{k}"] = round(time.perf_counter() - t, 4)
                if segment.barrier is not None:
                    summaries = partial(self.summaries, job, k, result.records[k])
                    rows = sum(_staged_rows(r) for r in result.records[k])
                    info = decide_once(job, k, segment.barrier, summaries, progress, rows)
                    result.decisions[job.barrier_positions[k]] = info
        except KeyboardInterrupt:
            self.terminate()
            raise
        except Exception as exc:
            problem = self.user_error(exc)
            if problem is not None:
                raise problem from None
            raise
        finally:
            self.close()
        return result

    def _run_pass(
        self, job: Job, k: int, progress: ProgressFn, previous: list[PartitionRecord] | None
    ) -> list[PartitionRecord]:
        phase = f"pass {k + 1}"
        tasks = [job.task(k, part) for part in job.partitions]
        records, todo = split_completed(tasks, phase)
        progress(phase, len(records), len(tasks))
        if todo:
            keys = {t.partition.key for t in todo}
            before = [r for r in previous or [] if r.partition in keys]
            docs, nbytes = _work_totals(todo, before)
            if self.runs_elsewhere():  # in this process, one at a time: the plan's order
                todo = costliest_first(todo, before)
            folder = job.staging.progress_dir(k)
            with PassWatch(progress, phase, len(tasks), records, folder, docs, nbytes) as watch:
                self.run_tasks(todo, records, phase, len(tasks), watch.partitions)
        missing = [t.partition.key for t in tasks if t.partition.key not in records]
        if missing:
            raise RuntimeError(f"{phase}: no record for partitions {missing[:5]}")
        return [records[t.partition.key] for t in tasks]


def _staged_rows(record: PartitionRecord) -> int:
    """Rows a partition staged for the next pass (each with its summary for the barrier)."""
    return sum(segment_rows(seg) for seg in record.files.segments)


_COMPRESSED = ("jsonl.gz", "jsonl.zst")


def costliest_first(todo: list[PassTask], previous: list[PartitionRecord]) -> list[PassTask]:
    """The tasks in the order to start them, the largest first: input bytes in the first
    pass (a compressed stream or a columnar input counts its file's size), rows staged for
    them after. What runs alone at the end of a pass, while the other workers have nothing
    left, is then a small partition (longest processing time first: 27 partitions of 1.5 to
    2.4 MB on 2 workers ended with one worker idle for 0.5 s). Ties keep the plan's order;
    only the order of starting changes, since records are kept by partition key. Partitions
    run one at a time in the driver (the local engine with one worker) keep the plan's
    order: nothing ends alone there, and a run that stops early stops at the first."""
    if len(todo) < 3:
        return todo
    if todo[0].pass_index > 0:
        rows = {r.partition: _staged_rows(r) for r in previous}
        sizes = [rows.get(t.partition.key, 0) for t in todo]
    else:
        sizes = [_input_bytes(t.partition) for t in todo]
    order = sorted(range(len(todo)), key=lambda i: -sizes[i])
    return [todo[i] for i in order]


def _input_bytes(part: Partition) -> int:
    if part.unit == "bytes" and part.input.format not in _COMPRESSED:
        return part.stop - part.start
    return part.input.size


def _work_totals(
    todo: list[PassTask], previous: list[PartitionRecord]
) -> tuple[int | None, int | None]:
    """What the partitions to run hold, for a pass's rate and ETA: after the first pass the
    documents staged for them; in the first, the input bytes when every one is a byte range
    of an uncompressed file (the rows in a compressed stream, a row group or a folder are
    not known before they are read)."""
    if todo[0].pass_index > 0:
        return sum(_staged_rows(r) for r in previous), None
    parts = [t.partition for t in todo]
    if all(p.unit == "bytes" and p.input.format not in _COMPRESSED for p in parts):
        return None, sum(p.stop - p.start for p in parts)
    return None, None

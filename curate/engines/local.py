"""The local engine: partitions run in a pool of worker processes on this machine.

With one worker everything runs in this process (easy to debug and profile). Results
are gathered by partition key, so the output never depends on finishing order.
A partition whose completion record is already in the staging folder (a previous,
interrupted run of the same fingerprint) is not run again. The workers pass what their
stages' memos learn to each other between partitions (`memo_exchange`), and at the end of a
pass those with no partition left help the busy ones through their documents (`help_desk`).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import multiprocessing
import signal
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from multiprocessing import resource_tracker
from multiprocessing.context import BaseContext

import pyarrow as pa

from curate.collective.frame import Summaries
from curate.engines import help_desk, memo_exchange
from curate.engines.barrier_step import summary_files
from curate.engines.base import Engine
from curate.engines.help_desk import HelpDesk
from curate.engines.job import Job, ProgressFn
from curate.engines.memo_exchange import MemoExchange
from curate.engines.tasks import PassTask, freeze_setups, run_pass_task
from curate.stages.shared_work import helps
from curate.staging.record import PartitionRecord

log = logging.getLogger(__name__)


_EXCHANGE: MemoExchange | None = None  # in a worker: the log its stages' memos share


def _worker_init(exchange: MemoExchange | None = None, desk: HelpDesk | None = None) -> None:
    global _EXCHANGE
    _EXCHANGE = exchange
    help_desk.join(desk)
    # Ctrl-C reaches the whole foreground process group: the driver alone handles it and
    # terminates the workers, so none prints a traceback or finishes its task first.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    # One process per core already: keep Arrow's own pools from oversubscribing.
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    freeze_setups()


def _warm() -> int:
    return 0


def _run_task(task: PassTask) -> PartitionRecord:
    """A partition in a worker, its stages' memos warmed by what the other workers learnt
    before, and what they learnt told after (`memo_exchange`)."""
    exchange = _EXCHANGE
    if exchange is not None:
        exchange.take_in()
    record = run_pass_task(task)
    if exchange is not None:
        exchange.tell()
    return record


def _fork_is_safe() -> bool:
    """Only a process with no thread pools may fork: a forked child inherits a pool's locks
    but not its threads, and hangs the first time it uses the pool. Python's own threads
    are countable; native pools are not, so any library that runs one (polars' rayon pool,
    once used, deadlocks a forked worker) rules fork out once it has been imported."""
    native_pools = ("polars",)
    return threading.active_count() == 1 and not any(m in sys.modules for m in native_pools)


def _import_pandas_once() -> None:
    """pyarrow imports pandas on the first `pa.array(...)` of a process (0.3 s or more).
    Importing it here, before the workers fork, pays that once instead of once per worker."""
    with contextlib.suppress(ImportError):
        import pandas  # noqa: F401


@contextlib.contextmanager
def _frozen_for_fork(forks: bool) -> Iterator[None]:
    """While the driver forks its workers, what it holds (modules, Presidio's recognizers,
    the plan) is out of the cyclic garbage collector's reach; the driver's own is put back
    as soon as the workers are forked.

    A forked worker's collector otherwise scans every object it inherited on each full
    collection, and each scan writes to the objects' headers, which copies the pages the
    fork had shared: on `benchmarks.pii`'s site corpus the workers spent 0.33-0.44 s each
    in the collector, 0.16-0.27 s with this. Frozen objects sit in a generation the
    collector never scans, Python's documented idiom for processes that fork without exec
    (`gc.freeze()` just before `fork()`); a worker keeps its inherited objects frozen for
    its life. The driver unfreezes its own at once, so its process (a notebook's, through
    the Python API) is left as it was, and a process that froze objects of its own is left
    alone: unfreezing would unfreeze those too."""
    if not forks or gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _import_collective() -> None:
    import curate.collective.local  # noqa: F401


class LocalEngine(Engine):
    kind = "local"
    workers: int

    def __init__(self, workers: int = 1) -> None:
        self.workers = max(1, workers)
        self._pool: Executor | None = None
        self._exchange: MemoExchange | None = None
        self._desk: HelpDesk | None = None

    def start(self) -> None:
        """Start the workers now, before the driver starts any thread of its own.

        Forking a process that has only its main thread is safe, and the workers then
        inherit every imported module instead of importing pyarrow and curate again
        (half a second each with spawn, or in a forkserver the driver waits for). Where
        fork is unavailable or threads already run, a forkserver with the task module
        preloaded is used instead.
        """
        if self.workers == 1 or self._pool is not None:
            return
        _import_pandas_once()
        ctx: BaseContext
        exchange = None
        if memo_exchange.available():  # inherited by a forked worker, else sent with it
            exchange = self._exchange = MemoExchange()
        if "fork" in multiprocessing.get_all_start_methods() and _fork_is_safe():
            ctx = multiprocessing.get_context("fork")
        else:
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(["curate.engines.no_sigint", "curate.engines.tasks"])
            # started here: starting it unblocks SIGINT, which must stay blocked below
            resource_tracker.ensure_running()
        self._desk = HelpDesk(self.workers, ctx)  # inherited by a forked worker, else sent
        # A Ctrl-C before _worker_init would interrupt a starting worker (or the forkserver
        # importing its preloads): they start with SIGINT blocked, a mask that fork and exec
        # keep, and unblock it once they ignore it. Here, a Ctrl-C (which another thread may
        # take) is held until every worker is registered, so that terminate() finds them all.
        held: list[int] = []
        main = threading.current_thread() is threading.main_thread()
        handler = signal.signal(signal.SIGINT, lambda n, _: held.append(n)) if main else None
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            with _frozen_for_fork(ctx.get_start_method() == "fork"):
                self._pool = ProcessPoolExecutor(
                    self.workers,
                    mp_context=ctx,
                    initializer=_worker_init,
                    initargs=(exchange, self._desk),
                )
                for _ in range(self.workers):  # starts every worker now (all forked on the first)
                    self._pool.submit(_warm)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            if main:
                signal.signal(signal.SIGINT, signal.SIG_DFL if handler is None else handler)
        if held:
            try:
                signal.raise_signal(signal.SIGINT)  # now, to the handler it was meant for
            except BaseException:
                self.terminate()
                raise

    def forks(self) -> bool:
        """Whether `start()` would fork the workers from this process as it is now."""
        return (
            self.workers > 1
            and self._pool is None
            and "fork" in multiprocessing.get_all_start_methods()
            and _fork_is_safe()
        )

    def runs_elsewhere(self) -> bool:
        return self._pool is not None

    def begin(self, job: Job) -> None:
        if len(job.partitions) > 1:
            self.start()
        if any(seg.barrier is not None for seg in job.segments):
            # The driver idles while workers run the first pass: import the collectives meanwhile.
            threading.Thread(target=_import_collective, daemon=True).start()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
        self._desk = None
        self._close_exchange()

    def _close_exchange(self) -> None:
        exchange, self._exchange = self._exchange, None
        if exchange is not None:
            exchange.close()

    def terminate(self) -> None:
        """Stop the workers now, mid-task (Ctrl-C): waiting for the running partitions took
        seconds to minutes. Completion records and checkpoints are written atomically after
        the files they name, so what they record is kept and the next run resumes from it."""
        pool, self._pool = self._pool, None
        self._desk = None
        if pool is None:
            return
        # Python 3.14 has ProcessPoolExecutor.terminate_workers(); before, only _processes
        processes = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            with contextlib.suppress(ProcessLookupError, ValueError):
                process.terminate()
        for process in processes:
            with contextlib.suppress(ValueError):
                process.join(timeout=1)
                if process.is_alive():
                    process.kill()
        self._close_exchange()

    def run_tasks(
        self,
        tasks: list[PassTask],
        records: dict[str, PartitionRecord],
        phase: str,
        total: int,
        progress: ProgressFn,
    ) -> None:
        pool = self._pool
        if pool is None:
            for task in tasks:
                records[task.partition.key] = run_pass_task(task)
                progress(phase, len(records), total)
            return
        pending = {pool.submit(_run_task, task) for task in tasks}
        desk = self._desk if any(helps(m) for task in tasks for m in task.maps) else None
        helpers: list[Future[int]] = []
        if desk is not None:  # queued behind the partitions: taken once none is left
            desk.open()
            helpers = [pool.submit(help_desk.serve) for _ in range(self.workers)]
        try:
            while pending:
                # Timed: a Ctrl-C can reach any thread of the driver (polars and Arrow start
                # their own), and Python's handler runs only once the main thread wakes up.
                done, pending = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
                for future in done:
                    record = future.result()
                    records[record.partition] = record
                    progress(phase, len(records), total)
        finally:
            if desk is not None:
                desk.close()
        for helper in helpers:  # home within help_desk.POLL once the pass is over
            helped = helper.result()
            if helped:
                log.debug("a worker helped with %d items", helped)

    def summaries(self, job: Job, k: int, records: list[PartitionRecord]) -> Summaries:
        from curate.collective.local import LocalSummaries

        spill = job.staging.spill(k)
        return LocalSummaries.from_files(summary_files(job.staging, job.partitions, records), spill)

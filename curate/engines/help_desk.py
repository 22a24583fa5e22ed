"""Idle workers help a busy one through its costly documents at the end of a pass.

A pass schedules partitions, and a partition costs what its documents cost: in the site
corpus of `benchmarks.pii` two 2 MB partitions take 3 s each against 0.3-0.6 s for the
others (tables of floats that the phone recognizer reads number by number), and whichever
started last ran alone for 1-1.5 s while the other worker had nothing left to do.

So the local engine queues one `serve` task per worker behind a pass's partitions: a worker
takes one only once every partition has started, and then waits at the desk until the pass
ends. A stage whose work on one document depends on that document alone (`help_with`:
the pii stage's analysis) goes through its documents with `curate.stages.shared_work.each`,
which the desk serves in each worker (`share`). Between two documents,
when a helper waits, it hands the documents left to the helpers; from then on it and they
claim the next document from a counter in shared memory, so at the end nobody waits for
more than the document the others are still on. Results come back by index and are put in
order, so a batch comes out the same whoever computed which document: the shards are the
same bytes with one worker, with helpers and without.

The desk is shared memory and pipes that the driver makes before its workers start (they
inherit them, or a forkserver hands them over as it starts them); each worker takes a slot
of its own. Only the run's own workers hold them, and nothing is left behind. A helper
that has not set up the stage (`tasks.ready`) claims nothing, and the stage does the work
itself.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext
from typing import Any, TypeVar

from curate.engines.tasks import ready_key, set_up_stages
from curate.errors import CurateError
from curate.stages import shared_work
from curate.stages.base import Stage

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

_OPEN, _WAITING, _SLOTS = range(3)  # fields of `HelpDesk.state`
POLL = 0.02  # seconds: how often a waiting helper looks whether the pass has ended
_DESK: HelpDesk | None = None  # in a worker: the desk it joined


class HelpDesk:
    """The shared state of one run's workers: who waits for work, and each poster's counter.

    `idle[s]` is 1 while the worker in slot s waits, `state[_WAITING]` how many do (read
    without the lock, as a hint). `next[s]` and `ends[s]` bound the documents still to
    claim in the job of the worker in slot s. Every change is made under `lock`.
    """

    def __init__(self, workers: int, ctx: BaseContext) -> None:
        self.lock = ctx.Lock()
        self.state = ctx.RawArray("q", 3)
        self.idle = ctx.RawArray("b", workers)
        self.pids = ctx.RawArray("q", workers)
        self.next = ctx.RawArray("q", workers)
        self.ends = ctx.RawArray("q", workers)
        self.inbox: list[tuple[Connection, Connection]] = [
            ctx.Pipe(duplex=False) for _ in range(workers)
        ]  # jobs to the worker in each slot
        self.outbox: list[tuple[Connection, Connection]] = [
            ctx.Pipe(duplex=False) for _ in range(workers)
        ]  # what it helped with, back to the poster
        self.slot = -1  # this process's slot (set by `join`)

    # -- in the driver ------------------------------------------------------------------
    def open(self) -> None:
        with self.lock:
            self.state[_OPEN] = 1

    def close(self) -> None:
        """The pass is over: helpers that wait go home (one that was just handed a job
        finishes it first)."""
        with self.lock:
            self.state[_OPEN] = 0

    # -- in a worker --------------------------------------------------------------------
    def join(self) -> bool:
        """Take a slot for this process; False when every slot is taken."""
        with self.lock:
            slot = self.state[_SLOTS]
            if slot >= len(self.idle):
                return False
            self.state[_SLOTS] = slot + 1
            self.pids[slot] = os.getpid()
        self.slot = slot
        return True

    def waiting(self) -> bool:
        return self.state[_WAITING] > 0

    def serve(self) -> int:
        """Wait for jobs until the pass ends; returns how many items this process computed."""
        me, helped = self.slot, 0
        reader, writer = self.inbox[me][0], self.outbox[me][1]
        while True:
            with self.lock:
                if not self.state[_OPEN]:
                    return helped
                self.idle[me] = 1
                self.state[_WAITING] += 1
            while not reader.poll(POLL):
                with self.lock:
                    if self.idle[me] and not self.state[_OPEN]:  # not handed a job: home
                        self.idle[me] = 0
                        self.state[_WAITING] -= 1
                        return helped
            poster, key, rest, base = reader.recv()
            done = self._work(poster, key, rest, base)
            writer.send(done)
            helped += len(done[1]) if done[0] == "ok" else 0

    def _work(
        self, poster: int, key: str, rest: list[tuple[int, Any]], base: int
    ) -> tuple[str, Any]:
        """The items of `poster`'s job this process claims: `rest` holds (index, item) from
        position `base` of the job's order on."""
        stage = set_up_stages().get(key)
        done: dict[int, Any] = {}
        if stage is None:  # not set up in this process: the poster does the work
            return "ok", done
        try:
            while (p := self.claim(poster)) >= 0:
                i, item = rest[p - base]
                done[i] = stage.help_with(item)  # type: ignore[attr-defined]
        except Exception as exc:  # the type only: a message may quote a document
            self.stop(poster)
            return "failed", type(exc).__name__
        log.debug("helped %s with %d items in process %d", stage.name, len(done), os.getpid())
        return "ok", done

    def claim(self, poster: int) -> int:
        """The position (in its order) of the next item of `poster`'s job to work on, -1
        when none is left."""
        with self.lock:
            k = self.next[poster]
            if k >= self.ends[poster]:
                return -1
            self.next[poster] = k + 1
            return k

    def stop(self, poster: int) -> None:
        """Nobody claims anything more of `poster`'s job."""
        with self.lock:
            self.next[poster] = self.ends[poster]

    def recruit(self, most: int) -> list[int]:
        """The slots of at most `most` helpers waiting now, taken off the desk for a job
        (each gets a copy of the items left: no more helpers than items)."""
        with self.lock:
            slots = [s for s in range(len(self.idle)) if self.idle[s]][: max(0, most)]
            for s in slots:
                self.idle[s] = 0
            self.state[_WAITING] -= len(slots)
        return slots

    def collect(self, helper: int) -> dict[int, Any]:
        """What `helper` computed of this process's job (waits for it to finish)."""
        reader = self.outbox[helper][0]
        pid = self.pids[helper]
        while not reader.poll(1.0):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                raise CurateError(f"worker process {pid} died while helping") from None
        status, done = reader.recv()
        if status != "ok":
            raise CurateError(f"a worker helping with documents failed ({done})")
        return dict(done)


class _Job:
    """This process's items from position `start` of `order` on, shared with helpers."""

    def __init__(
        self, desk: HelpDesk, stage: Stage, items: Sequence[Any], order: list[int], start: int
    ) -> None:
        self.desk, self.items, self.order = desk, items, order
        self.key = ready_key(stage)
        self.helpers: list[int] = []
        with desk.lock:
            desk.next[desk.slot] = start
            desk.ends[desk.slot] = len(order)

    def hand_out(self, slots: list[int]) -> None:
        """Send the items not claimed yet, with their indices, to the helpers in `slots`."""
        desk, me = self.desk, self.desk.slot
        with desk.lock:
            start = desk.next[me]
        rest = [(i, self.items[i]) for i in self.order[start:]]
        for s in slots:
            desk.inbox[s][1].send((me, self.key, rest, start))
            self.helpers.append(s)

    def finish(self, out: list[Any], work: Callable[[Any], Any]) -> list[Any]:
        desk, me = self.desk, self.desk.slot
        try:
            while (p := desk.claim(me)) >= 0:
                i = self.order[p]
                out[i] = work(self.items[i])
                left = len(self.order) - p - 1  # at most: others may have claimed some
                if left > 1 and desk.waiting() and (slots := desk.recruit(left - 1)):
                    self.hand_out(slots)
        finally:
            desk.stop(me)  # after a failure here too: helpers claim nothing more
            started = time.perf_counter()
            for helper in self.helpers:
                for i, result in desk.collect(helper).items():
                    out[i] = result
            waited = time.perf_counter() - started
            log.debug("waited %.3f s for %d helpers", waited, len(self.helpers))
        return out


def join(desk: HelpDesk | None) -> None:
    """In a worker, as it starts: take a slot at the run's desk, and share stages' items
    through it (`curate.stages.shared_work`)."""
    global _DESK
    _DESK = desk if desk is not None and desk.join() else None
    shared_work.install(share if _DESK is not None else None)


def serve() -> int:
    """A worker's task once no partition of the pass is left to start (`HelpDesk.serve`)."""
    return _DESK.serve() if _DESK is not None else 0


def share(
    stage: Stage,
    items: Sequence[T],
    work: Callable[[T], R],
    size: Callable[[T], int] | None = None,
) -> list[R]:
    """`work(item)` for every item, from the first moment a helper waits with the helpers
    (see the module), and with `size` the largest first: a document that costs seconds is
    then not the last one left. `work` is `stage.help_with`; results are in the items' order."""
    desk = _DESK
    if desk is None:  # installed only with a desk (`join`)
        return [work(item) for item in items]
    n = len(items)
    order = list(range(n)) if size is None else sorted(range(n), key=lambda i: -size(items[i]))
    out: list[Any] = [None] * n
    for p, i in enumerate(order):
        if n - p > 1 and desk.waiting():
            slots = desk.recruit(n - p - 1)
            if slots:
                job = _Job(desk, stage, items, order, p)
                job.hand_out(slots)
                return job.finish(out, work)
        out[i] = work(items[i])
    return out

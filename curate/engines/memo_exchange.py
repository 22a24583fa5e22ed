"""What the local engine's workers' stages learnt, passed between them.

A stage's memos (the pii stage's phone verdicts) warm up in each worker on its own, so with
two workers each computes much of what the other already knows: on the docs corpus the pii
partitions cost 1.067x the CPU of one worker's, and the verdicts computed grew 14.5%
(issue 25, `benchmarks/results/pii_split.md`). Here, after each partition a worker appends
what its stages learnt (`Stage.learnt`) to a log every worker shares, and before each
partition it takes in what the others appended since it last read (`Stage.learn`).

The log is an anonymous file in memory (Linux's memfd, at most `LIMIT` bytes) made by the
driver before its workers start: no path names it, so only the run's own workers, which
inherit its descriptor (or get a copy from the forkserver that starts them), can read or
write it, and nothing is left behind however the run ends. It holds what the memos hold,
text a pii stage removes among it (phone-like strings), so it is never a file on disk:
where memfd is missing (`available()`), workers keep what they learn to themselves. Each
frame is the payload's length and checksum and the writer's pid, then the payload (a pickle
of the stages' news by their set-up key; a worker skips its own frames unread). A worker
appends a frame in one write under a lock, and a reader reads only whole frames. A frame
that does not check, a payload that does not load, a log past its size limit: sharing
stops there, and the workers go on as they would without it.
What a stage takes in can never change an output (`Stage.learnt`), so neither the order in
which workers read, nor what they miss, changes a byte. The Ray engine passes the same news
(`packed_news`, `learn_packed`) as each task's second result, handed to the tasks after it
(`curate/engines/ray/adapter.py`).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import pickle
import struct
from typing import Any

import xxhash

from curate.engines.tasks import set_up_stages

log = logging.getLogger(__name__)

HEADER = struct.Struct("<QQQ")  # the payload's length, its xxh3_64, the writer's pid
LIMIT = 256 << 20  # bytes: past this, workers keep what they learn to themselves
_READ = 8 << 20  # bytes read at a time


def available() -> bool:
    """Whether a log can be made here (memfd: Linux)."""
    return hasattr(os, "memfd_create")


class MemoExchange:
    """The shared log, and where this process has read it to. Made in the driver before the
    workers start; each worker uses its own copy (its own read position)."""

    def __init__(self, limit: int = LIMIT, fd: int | None = None) -> None:
        self.fd = os.memfd_create("curate-memos", os.MFD_CLOEXEC) if fd is None else fd
        self.limit = limit
        self.read_to = 0
        self.stopped = False
        self.taken = 0  # stages' news this process took in from others (tests, logs)
        self.told = 0  # frames this process appended
        self.held: frozenset[str] = frozenset()  # the set-up stages the log was read for

    def __reduce__(self) -> tuple[Any, ...]:
        """To a worker the pool starts from a forkserver (the driver ran threads, so it did
        not fork): the descriptor goes with it as multiprocessing passes descriptors to the
        processes it starts; anywhere else the log does not go."""
        from multiprocessing import context, reduction

        if context.get_spawning_popen() is None:
            raise TypeError("a MemoExchange goes only to the workers its pool starts")
        return (_in_worker, (reduction.DupFd(self.fd), self.limit))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def _stop(self, why: str) -> None:
        self.stopped = True
        log.debug("memos no longer shared between workers (process %d): %s", os.getpid(), why)

    def tell(self) -> None:
        """Append what this process's set-up stages learnt since they last told."""
        if self.stopped:
            return
        try:
            payload = packed_news()
            if not payload:
                return
            check = xxhash.xxh3_64_intdigest(payload)
            frame = HEADER.pack(len(payload), check, os.getpid()) + payload
            fcntl.lockf(self.fd, fcntl.LOCK_EX)
            try:
                end = os.lseek(self.fd, 0, os.SEEK_END)
                if end + len(frame) > self.limit:
                    self._stop(f"the log reached {self.limit} bytes")
                    return
                view = memoryview(frame)
                while view:
                    view = view[os.pwrite(self.fd, view, end + len(frame) - len(view)) :]
            finally:
                fcntl.lockf(self.fd, fcntl.LOCK_UN)
            self.told += 1
        except Exception as exc:  # sharing is an optimisation: never a reason to fail
            self._stop(f"{type(exc).__name__}: {exc}")

    def take_in(self) -> None:
        """Take in what the other processes appended since this one last read.

        A stage set up here since then (in a worker's first partition: a worker started
        from a forkserver sets the pii stage up itself, and any worker the stages the
        driver does not) skipped what was told for it before: the log is read again from
        its start, and the stages that took a frame in already find nothing new in it."""
        if self.stopped:
            return
        try:
            held = frozenset(set_up_stages())
            if held - self.held:
                self.read_to = 0
            self.held = held
            size = os.fstat(self.fd).st_size
            me = os.getpid()
            while self.read_to + HEADER.size <= size:
                n, check, pid = HEADER.unpack(os.pread(self.fd, HEADER.size, self.read_to))
                start = self.read_to + HEADER.size
                if start + n > size:
                    break  # being written: read next time
                if pid == me:  # its own: known here already, not even read
                    self.read_to = start + n
                    continue
                payload = b"".join(
                    os.pread(self.fd, min(_READ, start + n - at), at)
                    for at in range(start, start + n, _READ)
                )
                if len(payload) != n or xxhash.xxh3_64_intdigest(payload) != check:
                    self._stop(f"a frame at byte {self.read_to} does not check")
                    return
                self.read_to = start + n
                self.taken += learn_packed(payload, f"process {pid}")
        except Exception as exc:
            self._stop(f"{type(exc).__name__}: {exc}")


def _in_worker(fd: Any, limit: int) -> MemoExchange:
    return MemoExchange(limit, fd.detach())


def packed_news() -> bytes:
    """What each stage this process has set up learnt since it last told, by its set-up key
    (the same key in every worker of a run), pickled; b"" when nothing. What a log frame
    carries, and a Ray task's news object after its writer's pid."""
    news = {}
    for key, stage in list(set_up_stages().items()):
        learnt = stage.learnt()
        if learnt is not None:
            news[key] = learnt
    return pickle.dumps(news, protocol=pickle.HIGHEST_PROTOCOL) if news else b""


def learn_packed(payload: bytes | memoryview, source: str) -> int:
    """Hand each stage set up here what the same stage learnt elsewhere (`packed_news` of
    another process; `source` names it in the log); returns how many stages took something
    in. A stage not set up here takes nothing: there is nothing of it to warm."""
    news: dict[str, Any] = pickle.loads(payload)
    stages = set_up_stages()
    taken = 0
    for key, learnt in news.items():
        stage = stages.get(key)
        if stage is not None:
            stage.learn(learnt)
            taken += 1
            log.debug("took in what %s learnt in %s", stage.name, source)
    return taken

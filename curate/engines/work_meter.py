"""Progress within partitions: workers say how far they are, the driver adds it up.

A partition can take minutes (one 95 MB file is one partition), so counting completed
partitions leaves a pass at "0/1" for its whole run. Each worker rewrites a tiny file,
`Staging.progress(k, key)` ("documents bytes"), after a chunk at most every
`curate.progress.interval()` seconds and once when its chunks run out (`metered`); the
driver's `PassWatch` reads the files of the running partitions as often and hands the
sums to the renderer (`curate.progress.Work`). Files in the staging folder work the same
for a process pool and for Ray workers on other nodes (the staging folder is on a
filesystem every node mounts), and cost a write of a few bytes per chunk at most, never a
step per document. Progress is best effort: a file that cannot be written or read is
skipped, never a build's failure; nothing of it reaches the shards.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from curate.io.batches import OFFSET
from curate.progress import Detailed, ProgressFn, Work, interval, report

log = logging.getLogger(__name__)

T = TypeVar("T", bound=tuple[Any, ...])


def metered(chunks: Iterator[T], path: Path, span: tuple[int, int] | None = None) -> Iterator[T]:
    """The chunks (each a tuple whose first item is a record batch or None), counting each
    one's rows and bytes into `path` once the loop over it has run its body.

    The bytes are the Arrow bytes of the batches, except when `span` gives the byte range
    of a plain file the pass reads (its first pass): then they are the bytes of that range
    read so far (up to the last row's line start, from the reader's `_offset` column), the
    very unit of the driver's `Work.bytes_total`, so a bar never counts past its total."""
    meter = _Meter(path, span)
    for item in chunks:
        yield item
        meter.add(item[0])
    if span is not None:
        meter.nbytes = span[1] - span[0]
    meter.write()


class _Meter:
    def __init__(self, path: Path, span: tuple[int, int] | None) -> None:
        self.path = path
        self.tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        self.every = interval()
        self.span = span
        self.docs = self.nbytes = 0
        self.written_at = time.monotonic()

    def add(self, batch: pa.RecordBatch | None) -> None:
        if batch is not None:
            self.docs += batch.num_rows
            if self.span is None:
                self.nbytes += batch.nbytes
            elif batch.num_rows and OFFSET in batch.schema.names:
                reached = pc.max(batch.column(OFFSET)).as_py()
                if reached is not None:
                    self.nbytes = max(self.nbytes, reached - self.span[0])
        if time.monotonic() - self.written_at >= self.every:
            self.write()

    def write(self) -> None:
        self.written_at = time.monotonic()
        with contextlib.suppress(OSError):  # best effort: the driver shows what it can
            self.tmp.write_text(f"{self.docs} {self.nbytes}\n")
            os.replace(self.tmp, self.path)


class PassWatch:
    """The driver's side for one pass: polls the workers' files while the pass runs and
    reports `Work` to a renderer that takes it (`curate.progress.Detailed`); `partitions`
    is the `progress` to give `run_tasks`, so a partition's completion is reported with
    the documents it read. Removes the pass's progress folder when it ends."""

    def __init__(
        self,
        progress: ProgressFn,
        phase: str,
        total: int,
        records: Mapping[str, object],
        folder: Path,
        docs_total: int | None = None,
        bytes_total: int | None = None,
    ) -> None:
        self.progress, self.phase, self.total = progress, phase, total
        self.records = records
        self.folder = folder
        self.docs_total, self.bytes_total = docs_total, bytes_total
        self.seen: dict[str, tuple[int, int]] = {}
        self.final: set[str] = set()  # read after their record arrived: no longer changing
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def __enter__(self) -> PassWatch:
        shutil.rmtree(self.folder, ignore_errors=True)  # an interrupted run's counts
        with contextlib.suppress(OSError):
            self.folder.mkdir()
        if isinstance(self.progress, Detailed):
            self.thread = threading.Thread(target=self._poll, name="curate-progress", daemon=True)
            self.thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
        shutil.rmtree(self.folder, ignore_errors=True)

    def partitions(self, phase: str, done: int, total: int) -> None:
        """What `run_tasks` calls as each partition completes."""
        self._update(done)

    def _poll(self) -> None:
        every = max(interval(), 0.01)
        while not self.stop.wait(every):
            try:
                self._update(len(self.records))
            except Exception:  # a renderer's failure must not end the build; it is seen once
                log.debug("progress: the renderer failed", exc_info=True)
                return

    def _update(self, done: int) -> None:
        with self.lock:
            work = self._work() if self.thread is not None else None
            report(self.progress, self.phase, done, self.total, work)

    def _work(self) -> Work:
        try:
            entries = list(os.scandir(self.folder))
        except OSError:
            entries = []
        for entry in entries:
            name = entry.name
            if name.startswith(".") or name in self.final:
                continue
            complete = name in self.records  # before reading: its last write is then in
            try:
                docs, nbytes = (int(v) for v in Path(entry.path).read_text().split())
            except (OSError, ValueError):
                continue
            self.seen[name] = (docs, nbytes)
            if complete:
                self.final.add(name)
        docs = sum(d for d, _ in self.seen.values())
        nbytes = sum(b for _, b in self.seen.values())
        return Work(docs, nbytes, self.docs_total, self.bytes_total)

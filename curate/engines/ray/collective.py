"""The collective operations' primitives on a Ray cluster, for decisions no node could hold.

The summaries stay where the workers spilled them: one Arrow file per partition and
segment in the staging folder, which every node mounts; a frame over them names files,
and the tasks read the columns they need. Every other frame is a list of object
references, one per piece, in Ray's object store (spilled to disk by Ray when it fills).

A shuffle goes through the shared filesystem, not the object store: each reading task
writes its rows cut into buckets as one file (each bucket an Arrow stream, one after the
other) and an index of where each bucket starts, and bucket task j reads its slice of
every reading task's file. Through the object store, every reading task would send one
object per bucket, readers x buckets objects that the driver owns at ~2.7 KB each
(measured: `benchmarks/ray_barrier_driver.py`), which at 10^9 documents is millions of
objects and gigabytes on the driver; through files the driver owns one reference per
reading task and per bucket. A shuffle's files are removed once its buckets are done.
The driver holds references and small folds only: never summaries, pairs, clusters or
the decision, whose pieces the engine writes from the bucket tasks themselves.
"""

from __future__ import annotations

import math
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import ray

from curate.collective.frame import Frame, PieceFn, Prepare, Side, Summaries
from curate.collective.pieces import (
    Files,
    SummaryFile,
    bucket_range,
    concat,
    hash_buckets,
    key_hash,
    load,
    range_buckets,
    split,
)
from curate.engines.ray.exchange import call

Piece: TypeAlias = ray.ObjectRef | Files


@dataclass(frozen=True)
class Shape:
    cpus: int
    bucket_bytes: int  # shuffled bytes each bucket task aims to hold
    map_buckets: int  # a reading task sends at most this many buckets' worth
    folder: Path  # shuffle files, on the filesystem every node mounts
    markers: Path | None = None  # where each task notes the node it ran on (`placement`)


class RayFrame(Frame):
    def __init__(self, pieces: list[Piece], partitions: int, shape: Shape) -> None:
        self.pieces = pieces
        self.partitions = partitions
        self.shape = shape

    def _derived(self, pieces: list[Piece]) -> RayFrame:
        return RayFrame(pieces, self.partitions, self.shape)

    def _call(
        self,
        fn: Callable[..., list[Any]],
        args: tuple[Any, ...],
        parts: list[Any],
        spread: bool = False,
    ) -> Any:
        """One task of this decision: its one output piece, as a reference."""
        return call(fn, args, parts, markers=self.shape.markers, spread=spread)[0]

    def _volume(self, row_bytes: int) -> int:
        if row_bytes:
            return self.count() * row_bytes
        return int(sum(self.fold(_nbytes)))

    def _readers(self, volume: int) -> list[list[Piece]]:
        """Pieces per reading task, in order: one task per CPU at least, and enough that none
        sends more than `map_buckets` buckets' worth."""
        s = self.shape
        n = max(s.cpus, math.ceil(volume / (s.map_buckets * s.bucket_bytes)))
        n = min(len(self.pieces), n)
        groups = np.array_split(np.arange(len(self.pieces)), n)
        return [[self.pieces[i] for i in g] for g in groups if len(g)]

    def _shuffle(
        self,
        volume: int,
        buckets: int,
        scatter: Callable[..., list[Path]],
        scatter_args: tuple[Any, ...],
        reduce_args: Callable[[int], tuple[Any, ...]],
    ) -> RayFrame:
        """Readers write their buckets to files; bucket task j reads slice j of each."""
        folder = self.shape.folder / f"shuffle-{uuid.uuid4().hex[:12]}"
        folder.mkdir(parents=True, exist_ok=True)
        written = [
            self._call(
                scatter, (*scatter_args, folder / f"reader-{i:05d}.arrows"), group, spread=True
            )
            for i, group in enumerate(self._readers(volume))
        ]
        out: list[Piece] = [
            self._call(_reduce_files, (j, *reduce_args(j)), written, spread=True)
            for j in range(buckets)
        ]
        ray.wait(out, num_returns=len(out), fetch_local=False)  # done with the files
        shutil.rmtree(folder, ignore_errors=True)
        return self._derived(out)

    def map(self, fn: PieceFn, *args: Any) -> Frame:
        return self._derived([self._call(_map, (fn, args), [p]) for p in self.pieces])

    def group(
        self, key: str, fn: PieceFn, *args: Any, prepare: Prepare = None, row_bytes: int = 0
    ) -> Frame:
        if not self.pieces:
            return self._derived([])
        volume = self._volume(row_bytes)
        s = self.shape
        n = max(1, min(1 << 16, max(s.cpus, math.ceil(volume / s.bucket_bytes))))
        return self._shuffle(volume, n, _scatter_hash, (key, n, prepare), lambda j: (fn, (), args))

    def by_partition(
        self,
        column: str,
        fn: PieceFn,
        *args: Any,
        prepare: Prepare = None,
        side: Side = None,
        row_bytes: int = 0,
    ) -> Frame:
        if not self.pieces:
            return self._derived([])
        volume = self._volume(row_bytes)
        s, p = self.shape, self.partitions
        n = max(1, min(p, max(s.cpus, math.ceil(volume / s.bucket_bytes))))

        def bucket_args(j: int) -> tuple[Any, ...]:
            lo, hi = bucket_range(j, n, p)
            return fn, ((lo, hi), side(lo, hi) if side is not None else None), args

        return self._shuffle(volume, n, _scatter_range, (column, n, p, prepare), bucket_args)

    def fold(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        return list(ray.get([self._call(_fold, (fn, args), [p]) for p in self.pieces]))


class RaySummaries(Summaries):
    """Summary rows in spilled files on the shared filesystem, worked on by Ray tasks."""

    bucket_bytes = 128 << 20
    """Shuffled bytes each bucket task aims to hold."""
    map_buckets = 8
    """A reading task sends at most this many buckets' worth (about 1 GB)."""
    read_bytes = 256 << 20
    """Bytes of summary files a frame's piece over them names, at most (one file aside)."""

    def __init__(
        self,
        files: list[tuple[Path, int]],
        cpus: int | None = None,
        folder: Path | None = None,
        markers: Path | None = None,
    ) -> None:
        """`files`: each summary file with the partition whose rows it holds; `folder`: where
        shuffles write (default: beside the summaries, in the staging folder); `markers`:
        where each task notes the node it ran on (`placement`; default: nowhere)."""
        self.markers = markers
        ordered = sorted(files, key=lambda fp: (fp[1], str(fp[0])))
        self.files = [SummaryFile(f, p) for f, p in ordered]
        self.partition = [p for _, p in ordered]
        self.partitions = max(self.partition, default=0) + 1
        self.cpus = cpus or max(1, int(ray.cluster_resources().get("CPU", 1)))
        base = folder or (self.files[0].path.parent if self.files else Path("."))
        self.folder = base / f"collective-{uuid.uuid4().hex[:8]}"

    def rows(self, columns: list[str]) -> Frame:
        shape = Shape(self.cpus, self.bucket_bytes, self.map_buckets, self.folder, self.markers)
        if not self.files:
            return RayFrame([], self.partitions, shape)
        sizes = [f.path.stat().st_size for f in self.files]
        n = min(len(self.files), max(self.cpus, math.ceil(sum(sizes) / self.read_bytes)))
        groups = np.array_split(np.arange(len(self.files)), n)
        pieces: list[Piece] = [
            Files(tuple(self.files[i] for i in g), tuple(columns)) for g in groups if len(g)
        ]
        return RayFrame(pieces, self.partitions, shape)

    def sources(self, lo: int, hi: int) -> list[Any]:
        start = int(np.searchsorted(self.partition, lo, side="left"))
        stop = int(np.searchsorted(self.partition, hi, side="left"))
        return self.files[start:stop]

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


# -- task bodies (run in Ray workers) ---------------------------------------------------


def _prepared(parts: list[Any], prepare: Prepare) -> pa.Table:
    tables = [load(p) for p in parts]
    if prepare is not None:
        tables = [prepare[0](t, *prepare[1]) for t in tables]
    return concat(tables)


def _nbytes(table: pa.Table) -> int:
    return int(table.nbytes)


def _map(parts: list[Any], fn: PieceFn, args: tuple[Any, ...]) -> list[pa.Table]:
    return [fn(load(parts[0]), *args)]


def _fold(parts: list[Any], fn: Callable[..., Any], args: tuple[Any, ...]) -> list[Any]:
    return [fn(load(parts[0]), *args)]


def _write_buckets(pieces: list[pa.Table], path: Path) -> list[Path]:
    """The pieces as Arrow streams one after another, and `<path>.index`: where each starts
    (int64, one more than there are pieces). Renamed into place, so a rerun of the task
    replaces them whole."""
    offsets = [0]
    with open(f"{path}.tmp", "wb") as f:
        for piece in pieces:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, piece.schema) as writer:
                writer.write_table(piece)
            data = sink.getvalue()
            f.write(data)
            offsets.append(offsets[-1] + data.size)
    np.asarray(offsets, np.int64).tofile(f"{path}.index.tmp")
    os.replace(f"{path}.index.tmp", f"{path}.index")
    os.replace(f"{path}.tmp", path)
    return [path]


def _read_bucket(path: Path, j: int) -> pa.Table:
    with open(f"{path}.index", "rb") as f:
        f.seek(8 * j)
        lo, hi = np.frombuffer(f.read(16), np.int64)
    with open(path, "rb") as f:
        f.seek(int(lo))
        data = f.read(int(hi - lo))
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def _scatter_hash(
    parts: list[Any], key: str, buckets: int, prepare: Prepare, path: Path
) -> list[Path]:
    table = _prepared(parts, prepare)
    return _write_buckets(
        split(table, hash_buckets(key_hash(table.column(key)), buckets), buckets), path
    )


def _scatter_range(
    parts: list[Any], column: str, buckets: int, partitions: int, prepare: Prepare, path: Path
) -> list[Path]:
    table = _prepared(parts, prepare)
    orders = table.column(column).to_numpy()
    return _write_buckets(split(table, range_buckets(orders, buckets, partitions), buckets), path)


def _reduce_files(
    paths: list[Path], j: int, fn: PieceFn, head: tuple[Any, ...], args: tuple[Any, ...]
) -> list[pa.Table]:
    """Bucket j of every reading task's file, then `fn(rows, *head, *args)`."""
    return [fn(concat([_read_bucket(p, j) for p in paths]), *head, *args)]

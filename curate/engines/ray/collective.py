"""The collective operations' primitives on a Ray cluster, for decisions no node could hold.

The summaries stay where the workers spilled them: one Arrow file per partition and
segment in the staging folder, which every node mounts; a frame over them names files,
and the tasks read the columns they need. Every other frame is a list of object
references, one per piece, in Ray's object store (spilled to disk by Ray when it fills).
A shuffle is a round of reading tasks, each sending one piece to every bucket, and a round
of bucket tasks (`exchange`); a fold sends back one small value per piece. The driver
holds references and those small values only: never summaries, pairs, clusters or the
decision, whose pieces the engine writes from the bucket tasks themselves.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import ray

from curate.engines.collective import Frame, PieceFn, Prepare, Side, Summaries
from curate.engines.pieces import (
    Files,
    bucket_range,
    concat,
    hash_buckets,
    key_hash,
    load,
    range_buckets,
    split,
)
from curate.engines.ray.exchange import call, exchange

Piece: TypeAlias = ray.ObjectRef | Files
MIN_PIECE = 256 << 10
"""Bytes a shuffle's piece aims at, at least: above Ray's 100 KB limit for results it keeps
in the owner's (the driver's) memory instead of the object store."""


@dataclass(frozen=True)
class Shape:
    cpus: int
    bucket_bytes: int  # shuffled bytes each bucket task aims to hold
    map_buckets: int  # a reading task sends at most this many buckets' worth


class RayFrame(Frame):
    def __init__(self, pieces: list[Piece], partitions: int, shape: Shape) -> None:
        self.pieces = pieces
        self.partitions = partitions
        self.shape = shape

    def _derived(self, pieces: list[Piece]) -> RayFrame:
        return RayFrame(pieces, self.partitions, self.shape)

    def _volume(self, row_bytes: int) -> int:
        if row_bytes:
            return self.count() * row_bytes
        return int(sum(self.fold(_nbytes)))

    def _readers(self, volume: int, buckets: int) -> list[list[Piece]]:
        """Pieces per reading task, in order: one task per CPU, or enough that none sends
        more than `map_buckets` buckets' worth; but few enough that each piece sent is
        `MIN_PIECE` on average. Every reading task sends a piece to every bucket, so there
        are readers x buckets objects, all owned by the driver; and Ray keeps a task's
        results under 100 KB in its owner's memory, not in the object store, so many small
        pieces would add up there. One reader when the whole shuffle is small."""
        s = self.shape
        n = max(s.cpus, math.ceil(volume / (s.map_buckets * s.bucket_bytes)))
        n = min(len(self.pieces), n, max(1, volume // (buckets * MIN_PIECE)))
        groups = np.array_split(np.arange(len(self.pieces)), n)
        return [[self.pieces[i] for i in g] for g in groups if len(g)]

    def map(self, fn: PieceFn, *args: Any) -> Frame:
        return self._derived([call(_map, (fn, args), [p])[0] for p in self.pieces])

    def group(
        self, key: str, fn: PieceFn, *args: Any, prepare: Prepare = None, row_bytes: int = 0
    ) -> Frame:
        if not self.pieces:
            return self._derived([])
        volume = self._volume(row_bytes)
        s = self.shape
        n = max(1, min(4096, max(s.cpus, math.ceil(volume / s.bucket_bytes))))
        sent = [
            call(_scatter_hash, (key, n, prepare), g, outputs=n) for g in self._readers(volume, n)
        ]
        out = exchange(sent, _reduce, lambda j: (fn, args))
        return self._derived([r[0] for r in out])

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
        sent = [
            call(_scatter_range, (column, n, p, prepare), g, outputs=n)
            for g in self._readers(volume, n)
        ]

        def bucket_args(j: int) -> tuple[Any, ...]:
            lo, hi = bucket_range(j, n, p)
            return fn, (lo, hi), side(lo, hi) if side is not None else None, args

        out = exchange(sent, _reduce_range, bucket_args)
        return self._derived([r[0] for r in out])

    def fold(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        return list(ray.get([call(_fold, (fn, args), [p])[0] for p in self.pieces]))


class RaySummaries(Summaries):
    """Summary rows in spilled files on the shared filesystem, worked on by Ray tasks."""

    bucket_bytes = 128 << 20
    """Shuffled bytes each bucket task aims to hold."""
    map_buckets = 8
    """A reading task sends at most this many buckets' worth (about 1 GB)."""
    read_bytes = 256 << 20
    """Bytes of summary files a frame's piece over them names, at most (one file aside)."""

    def __init__(self, files: list[tuple[Path, int]], cpus: int | None = None) -> None:
        """`files`: each summary file with the partition whose rows it holds."""
        ordered = sorted(files, key=lambda fp: (fp[1], str(fp[0])))
        self.files = [f for f, _ in ordered]
        self.partition = [p for _, p in ordered]
        self.partitions = max(self.partition, default=0) + 1
        self.cpus = cpus or max(1, int(ray.cluster_resources().get("CPU", 1)))

    def rows(self, columns: list[str]) -> Frame:
        shape = Shape(self.cpus, self.bucket_bytes, self.map_buckets)
        if not self.files:
            return RayFrame([], self.partitions, shape)
        sizes = [f.stat().st_size for f in self.files]
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


def _scatter_hash(parts: list[Any], key: str, buckets: int, prepare: Prepare) -> list[pa.Table]:
    table = _prepared(parts, prepare)
    return split(table, hash_buckets(key_hash(table.column(key)), buckets), buckets)


def _scatter_range(
    parts: list[Any], column: str, buckets: int, partitions: int, prepare: Prepare
) -> list[pa.Table]:
    table = _prepared(parts, prepare)
    orders = table.column(column).to_numpy()
    return split(table, range_buckets(orders, buckets, partitions), buckets)


def _reduce(parts: list[pa.Table], fn: PieceFn, args: tuple[Any, ...]) -> list[pa.Table]:
    return [fn(concat(parts), *args)]


def _reduce_range(
    parts: list[pa.Table],
    fn: PieceFn,
    part_range: tuple[int, int],
    extra: Any,
    args: tuple[Any, ...],
) -> list[pa.Table]:
    return [fn(concat(parts), part_range, extra, *args)]

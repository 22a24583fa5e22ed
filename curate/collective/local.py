"""The collective operations' primitives in this process, spilling to files when large.

A `LocalFrame` keeps its pieces as tables in memory, or, past `spill_bytes`, as Arrow
files in a spill folder (in the staging folder, removed when the decision is made). A
shuffle whose rows fit `budget` runs as one piece; a larger one is cut into buckets of
about `budget` bytes, each bucket's parts spilled as they are cut (every part, however
small: a hundred buckets' parts of a few MB each add up to the whole table) and read back
one bucket at a time, and the buckets' results are spilled too, so memory stays near one
bucket whatever the number of summaries (line_dedup's unit occurrences: 10^8 lines are
2.4 GB of shuffled rows, held 256 MB at a time).
"""

from __future__ import annotations

import itertools
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeAlias

import pyarrow as pa

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
from curate.io.batches import ORDER, partition_of

Piece: TypeAlias = pa.Table | Files | SummaryFile | Path


class Spill:
    """Where a frame's large pieces go: numbered Arrow files in one folder."""

    def __init__(self, folder: Path | None, spill_bytes: int) -> None:
        self.folder = folder
        self.spill_bytes = spill_bytes
        self._names = itertools.count()

    def keep(self, table: pa.Table, always: bool = False) -> Piece:
        """The table, or the file it was spilled to: when it is large, or (`always`) when
        it is one of many that together may be (a bucketed shuffle's parts and results)."""
        small = table.nbytes < self.spill_bytes and not (always and table.num_rows)
        if self.folder is None or small:
            return table
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"piece-{next(self._names):07d}.arrow"
        with pa.ipc.new_file(str(path), table.schema) as writer:
            writer.write_table(table)
        return path

    def close(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def piece_bytes(piece: Piece) -> int:
    if isinstance(piece, Files):
        return piece.nbytes()
    if isinstance(piece, SummaryFile):
        return piece.path.stat().st_size
    if isinstance(piece, Path):
        return piece.stat().st_size
    return int(piece.nbytes)


def _prepared(piece: Piece, prepare: Prepare) -> pa.Table:
    table = load(piece)
    return prepare[0](table, *prepare[1]) if prepare is not None else table


class LocalFrame(Frame):
    def __init__(self, pieces: list[Piece], partitions: int, spill: Spill, budget: int) -> None:
        self.pieces = pieces
        self.partitions = partitions
        self.spill = spill
        self.budget = budget

    def _derived(self, pieces: list[Piece]) -> LocalFrame:
        return LocalFrame(pieces, self.partitions, self.spill, self.budget)

    def _buckets(self, row_bytes: int) -> int:
        volume = self.count() * row_bytes if row_bytes else sum(piece_bytes(p) for p in self.pieces)
        return max(1, math.ceil(volume / self.budget))

    def _shuffle(
        self, buckets: int, prepare: Prepare, to_bucket: Callable[[pa.Table], Any]
    ) -> list[list[Piece]]:
        """Each piece cut into `buckets` parts (one bucket: the pieces as they are)."""
        parts: list[list[Piece]] = [[] for _ in range(buckets)]
        for piece in self.pieces:
            table = _prepared(piece, prepare)
            if buckets == 1:
                parts[0].append(self.spill.keep(table))
                continue
            for j, part in enumerate(split(table, to_bucket(table), buckets)):
                if part.num_rows:
                    parts[j].append(self.spill.keep(part, always=True))
        return parts

    def map(self, fn: PieceFn, *args: Any) -> Frame:
        return self._derived([self.spill.keep(fn(load(p), *args)) for p in self.pieces])

    def group(
        self, key: str, fn: PieceFn, *args: Any, prepare: Prepare = None, row_bytes: int = 0
    ) -> Frame:
        if not self.pieces:
            return self._derived([])
        n = self._buckets(row_bytes)
        parts = self._shuffle(n, prepare, lambda t: hash_buckets(key_hash(t.column(key)), n))
        many = n > 1
        out = [self.spill.keep(fn(concat([load(p) for p in b]), *args), many) for b in parts if b]
        return self._derived(out)

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
        n = min(self.partitions, self._buckets(row_bytes))
        partitions = self.partitions
        parts = self._shuffle(
            n, prepare, lambda t: range_buckets(t.column(column).to_numpy(), n, partitions)
        )
        out = []
        for j, bucket in enumerate(parts):
            if not bucket:
                continue
            lo, hi = bucket_range(j, n, partitions)
            extra = side(lo, hi) if side is not None else None
            table = fn(concat([load(p) for p in bucket]), (lo, hi), extra, *args)
            out.append(self.spill.keep(table, always=n > 1))
        return self._derived(out)

    def fold(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        return [fn(load(p), *args) for p in self.pieces]


class LocalSummaries(Summaries):
    """Summary rows held by this process: Arrow files spilled by each partition, read a few
    columns at a time, or in-memory tables (for `Pipeline.process` on small data)."""

    budget = 256 << 20
    """Bytes of rows a shuffle holds at once before it cuts them into buckets."""
    spill_bytes = 64 << 20
    """Pieces from this size on are written to the spill folder (when there is one)."""

    def __init__(
        self,
        sources: list[tuple[SummaryFile | pa.Table, int, int]],
        spill_folder: Path | None = None,
    ) -> None:
        """`sources`: each summary file or table with the first and last partition it holds."""
        self._sources = sources
        self.partitions = max((last for _, _, last in sources), default=0) + 1
        self.spill = Spill(spill_folder, self.spill_bytes)

    @classmethod
    def from_files(
        cls, files: list[tuple[Path, int]], spill_folder: Path | None = None
    ) -> LocalSummaries:
        """Each file with the index in this run of the partition whose rows it holds."""
        ordered = sorted(files, key=lambda fp: (fp[1], str(fp[0])))
        return cls([(SummaryFile(f, p), p, p) for f, p in ordered], spill_folder)

    @classmethod
    def from_tables(cls, tables: list[pa.Table | pa.RecordBatch]) -> LocalSummaries:
        sources: list[tuple[SummaryFile | pa.Table, int, int]] = []
        for t in tables:
            if not t.num_rows:
                continue
            table = pa.Table.from_batches([t]) if isinstance(t, pa.RecordBatch) else t
            parts = partition_of(table.column(ORDER).to_numpy())
            sources.append((table, int(parts.min()), int(parts.max())))
        return cls(sources)

    def rows(self, columns: list[str]) -> Frame:
        pieces: list[Piece] = [
            Files((s,), tuple(columns)) if isinstance(s, SummaryFile) else s.select(columns)
            for s, _, _ in self._sources
        ]
        spill = self.spill
        spill.spill_bytes = self.spill_bytes
        return LocalFrame(pieces, self.partitions, spill, self.budget)

    def sources(self, lo: int, hi: int) -> list[Any]:
        return [s for s, first, last in self._sources if first < hi and last >= lo]

    def close(self) -> None:
        self.spill.close()

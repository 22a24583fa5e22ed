"""Helpers on Arrow tables that every engine's collective operations share.

Hashing keys to buckets, cutting a table into buckets, reading spilled summary columns,
finding runs of equal values and distinct pairs. Pure functions of their arguments, so
any engine may run them in any process, twice if a worker died.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from curate.io.batches import ORDER_SHIFT, partition_of, with_partition

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
MAX_PARTITIONS = 1 << (64 - ORDER_SHIFT)  # every partition an `_order` can point into


@dataclass(frozen=True)
class SummaryFile:
    """One segment of a partition's summaries as a worker spilled it, and the partition's
    index in this run: the file holds each row's `_order` within its partition only, and
    reading it puts the index back (`io.batches.with_partition`)."""

    path: Path
    partition: int

    def read(self, columns: list[str] | None = None) -> pa.Table:
        table = pa.ipc.open_file(pa.memory_map(str(self.path))).read_all()
        if columns is not None:
            table = table.select(columns)
        return with_partition(table, self.partition)


@dataclass(frozen=True)
class Files:
    """A piece of a table that is still on disk: these columns of these summary files."""

    files: tuple[SummaryFile, ...]
    columns: tuple[str, ...]

    def load(self) -> pa.Table:
        return concat([f.read(list(self.columns)) for f in self.files])

    def nbytes(self) -> int:
        return sum(read_columns(f.path, list(self.columns)).nbytes for f in self.files)


def load(piece: pa.Table | Files | SummaryFile | Path) -> pa.Table:
    """A piece as a table: in memory already, columns of summary files, a whole summary
    file, or a spilled table."""
    if isinstance(piece, Files):
        return piece.load()
    if isinstance(piece, SummaryFile):
        return piece.read()
    if isinstance(piece, Path):
        return pa.ipc.open_file(pa.memory_map(str(piece))).read_all()
    return piece


def read_columns(path: Path, columns: list[str]) -> pa.Table:
    """Columns of one spilled file (memory-mapped: only what is touched is read), as stored."""
    return pa.ipc.open_file(pa.memory_map(str(path))).read_all().select(columns)


def key_hash(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A uint64 per value, equal for equal values in every process (never persisted)."""
    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    kind = col.type
    if pa.types.is_integer(kind):
        return col.fill_null(0).to_numpy().astype(np.uint64)
    if pa.types.is_fixed_size_binary(kind) and kind.byte_width >= 8:
        width = kind.byte_width
        raw = np.frombuffer(col.buffers()[1], np.uint8)
        raw = raw[col.offset * width : (col.offset + len(col)) * width].reshape(-1, width)
        return np.ascontiguousarray(raw[:, :8]).view("<u8").ravel().copy()
    values = col.cast(pa.binary()).to_pylist()
    return np.array([xxhash.xxh3_64_intdigest(v or b"") for v in values], np.uint64)


def hash_buckets(hashes: np.ndarray, buckets: int) -> np.ndarray:
    return ((hashes * GOLDEN) >> np.uint64(32)) % np.uint64(buckets)


def range_buckets(orders: np.ndarray, buckets: int, partitions: int) -> np.ndarray:
    """Buckets by partition, in order: concatenating buckets keeps `_order` sorted."""
    return np.minimum(partition_of(orders) * buckets // max(partitions, 1), buckets - 1)


def bucket_range(j: int, buckets: int, partitions: int) -> tuple[int, int]:
    """The partitions [lo, hi) that `range_buckets` sends to bucket j."""

    def first(b: int) -> int:  # smallest p with p * buckets // partitions >= b
        return -(-b * partitions // buckets)

    lo = first(j)
    hi = MAX_PARTITIONS if j == buckets - 1 else first(j + 1)  # the last takes any beyond
    return lo, max(lo, hi)


def split(table: pa.Table, bucket: np.ndarray, buckets: int) -> list[pa.Table]:
    """One compact table per bucket (copies, so a piece never drags its neighbours along)."""
    order = np.argsort(bucket, kind="stable")
    bounds = np.searchsorted(bucket[order], np.arange(buckets + 1))
    return [table.take(pa.array(order[bounds[j] : bounds[j + 1]])) for j in range(buckets)]


def concat(parts: list[pa.Table]) -> pa.Table:
    """The parts as one table; empty parts are left out (an empty piece may carry a column
    of null type where the others carry the real one)."""
    tables = [p for p in parts if p is not None and p.num_columns]
    full = [t for t in tables if t.num_rows]
    if full:
        return pa.concat_tables(full) if len(full) > 1 else full[0]
    return tables[0] if tables else pa.table({})


def runs(table: pa.Table, columns: list[str]) -> np.ndarray:
    """For rows sorted by `columns` (no nulls): True where a row starts a run of equal values."""
    n = table.num_rows
    new = np.zeros(n, bool)
    if n == 0:
        return new
    new[0] = True
    for name in columns:
        col = table.column(name).combine_chunks()
        same = pc.equal(col.slice(1), col.slice(0, n - 1)).to_numpy(zero_copy_only=False)
        new[1:] |= ~same
    return new

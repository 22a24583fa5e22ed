"""Moving summary rows between Ray tasks: a hash shuffle through the object store.

A round of tasks each returns one piece per bucket of the next round (`num_returns`),
and task j of the next round receives piece j of every task before it. No task and not
the driver ever holds more than its bucket; the driver holds only object references.
Every function here is pure, so Ray may run any of them twice (a worker died) safely.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import ray
import xxhash

from curate.stages.base import ORDER

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
PART_SHIFT = np.uint64(40)  # `_order` = partition << 40 | row (curate.engines.tasks.ORDER_SHIFT)


@ray.remote
def _run(fn: Callable[..., list[Any]], args: tuple[Any, ...], outputs: int, *parts: Any) -> Any:
    result = fn(list(parts), *args)
    if len(result) != outputs:
        raise ValueError(f"{fn.__name__} returned {len(result)} pieces, not {outputs}")
    return result[0] if outputs == 1 else tuple(result)


def call(
    fn: Callable[..., list[Any]], args: tuple[Any, ...], parts: Sequence[Any] = (), outputs: int = 1
) -> list[ray.ObjectRef]:
    """Run `fn(parts, *args)` as a Ray task; its list of `outputs` pieces, as references."""
    refs = _run.options(num_returns=outputs).remote(fn, args, outputs, *parts)
    return [refs] if outputs == 1 else list(refs)


def exchange(
    producers: list[list[ray.ObjectRef]],
    fn: Callable[..., list[Any]],
    args: tuple[Any, ...],
    outputs: int = 1,
) -> list[list[ray.ObjectRef]]:
    """Task j of the next round gets piece j of every producer."""
    buckets = len(producers[0]) if producers else 0
    return [call(fn, args, [p[j] for p in producers], outputs) for j in range(buckets)]


def read_columns(path: Path, columns: list[str]) -> pa.Table:
    """Columns of one spilled summary file (memory-mapped: only what is touched is read)."""
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
    parts = (orders >> PART_SHIFT).astype(np.int64)
    return np.minimum(parts * buckets // max(partitions, 1), buckets - 1)


def split(table: pa.Table, bucket: np.ndarray, buckets: int) -> list[pa.Table]:
    """One compact table per bucket (copies, so a piece never drags its neighbours along)."""
    order = np.argsort(bucket, kind="stable")
    bounds = np.searchsorted(bucket[order], np.arange(buckets + 1))
    return [table.take(pa.array(order[bounds[j] : bounds[j + 1]])) for j in range(buckets)]


def concat(parts: list[pa.Table]) -> pa.Table:
    tables = [p for p in parts if p is not None]
    return pa.concat_tables(tables) if tables else pa.table({})


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


def unique_pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (a, b) pairs, sorted by a then b."""
    if not len(a):
        return a, b
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    keep = np.concatenate([[True], (a[1:] != a[:-1]) | (b[1:] != b[:-1])])
    return a[keep], b[keep]


def rows_of(path: Path, columns: list[str], wanted: np.ndarray) -> pa.Table:
    """`_order` and `columns` of the rows of one summary file whose `_order` is wanted."""
    table = read_columns(path, [ORDER, *columns])
    hit = pc.is_in(table.column(ORDER), value_set=pa.array(wanted, pa.uint64()))
    return table.filter(hit)

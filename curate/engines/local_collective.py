"""Collective operations for the local engine: polars over the staged summary files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from curate.engines.collective import PairScore, Summaries
from curate.stages.base import ORDER

EDGES_SCHEMA = pa.schema([pa.field("a", pa.uint64()), pa.field("b", pa.uint64())])


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """`np.unique` by sorting: numpy 2.4's hash-based `np.unique` is ~100x slower on uint64."""
    values = np.sort(values)
    return values[np.concatenate([[True], values[1:] != values[:-1]])] if len(values) else values


class LocalSummaries(Summaries):
    """Summary rows held by this process: Arrow IPC files spilled by each partition, scanned
    lazily by polars, or in-memory tables (for `Pipeline.process` on small data)."""

    value_budget = 256 << 20
    """Bytes of fetched values `score_pairs` aims to hold at once; the first piece (of
    `first_pairs` pairs) measures how many bytes a row's value takes."""
    first_pairs = 1 << 16

    def __init__(self, frames: list[pl.LazyFrame]) -> None:
        self.frames = frames

    @classmethod
    def from_files(cls, files: list[Path]) -> LocalSummaries:
        return cls([pl.scan_ipc(f) for f in sorted(files)])

    @classmethod
    def from_tables(cls, tables: list[pa.Table | pa.RecordBatch]) -> LocalSummaries:
        return cls([pl.from_arrow(t).lazy() for t in tables if t.num_rows])  # type: ignore[union-attr]

    def _scan(self) -> pl.LazyFrame:
        return pl.concat(self.frames)

    def count(self) -> int:
        if not self.frames:
            return 0
        return int(self._scan().select(pl.len()).collect().item())

    def repeated_id(self) -> str | None:
        if not self.frames:
            return None
        ids = self._scan().select("id")
        repeated = ids.group_by("id").len().filter(pl.col("len") > 1).head(1).collect()
        return str(repeated["id"][0]) if repeated.height else None

    def first_by_key(self, key: str) -> pa.Table:
        empty = pa.table(
            {
                "id": pa.array([], pa.string()),
                ORDER: pa.array([], pa.uint64()),
                "first_id": pa.array([], pa.string()),
            }
        )
        if not self.frames:
            return empty
        rows = self._scan().select(key, "id", ORDER)
        firsts = rows.group_by(key).agg(
            pl.col("id").sort_by(ORDER).first().alias("first_id"),
            pl.col(ORDER).min().alias("_first"),
        )
        later = (
            rows.join(firsts, on=key, how="inner")
            .filter(pl.col(ORDER) != pl.col("_first"))
            .select(
                pl.col("id").cast(pl.String),
                pl.col(ORDER).cast(pl.UInt64),
                pl.col("first_id").cast(pl.String),
            )
            .sort(ORDER)
            .collect(engine="streaming")
        )
        if later.height == 0:
            return empty
        return later.to_arrow().cast(empty.schema)

    def star_edges(self, keys: list[str]) -> pa.Table:
        edges = pl.DataFrame(schema={"a": pl.UInt64, "b": pl.UInt64})
        if not self.frames:
            return EDGES_SCHEMA.empty_table()
        for key in keys:  # one key at a time: memory is one column of keys, not all of them
            rows = self._scan().select(key, ORDER).filter(pl.col(key).is_not_null())
            firsts = (
                rows.group_by(key)
                .agg(pl.col(ORDER).min().alias("a"), pl.len().alias("_n"))
                .filter(pl.col("_n") > 1)
                .select(key, "a")
            )
            found = (
                rows.join(firsts, on=key, how="inner")
                .filter(pl.col(ORDER) != pl.col("a"))
                .select(pl.col("a").cast(pl.UInt64), pl.col(ORDER).cast(pl.UInt64).alias("b"))
                .collect(engine="streaming")
            )
            edges = pl.concat([edges, found]).unique()
        return edges.sort("a", "b").to_arrow().cast(EDGES_SCHEMA)

    def score_pairs(self, pairs: pa.Table, column: str, score: PairScore) -> np.ndarray:
        a = pairs.column("a").to_numpy().astype(np.uint64)
        b = pairs.column("b").to_numpy().astype(np.uint64)
        out = np.zeros(len(a), np.float64)
        by_first = np.argsort(a, kind="stable")
        start, step = 0, self.first_pairs
        while start < len(a):
            chunk = by_first[start : start + step]
            nodes = sorted_unique(np.concatenate([a[chunk], b[chunk]]))
            found = (
                self._scan()
                .select(ORDER, column)
                .filter(pl.col(ORDER).is_in(pl.Series(nodes, dtype=pl.UInt64).implode()))
                .sort(ORDER)
                .collect(engine="streaming")
            )
            have = found.get_column(ORDER).to_numpy()
            if len(have) != len(nodes):
                raise ValueError(f"score_pairs: {len(nodes) - len(have)} rows not in summaries")
            values = found.get_column(column).to_arrow()
            left = np.searchsorted(have, a[chunk])
            right = np.searchsorted(have, b[chunk])
            out[chunk] = score(values, left, right)
            start += len(chunk)
            per_pair = max(1, values.nbytes) / len(chunk)  # each pair adds up to two rows
            step = max(1, int(self.value_budget / per_pair))
        return out

    def connected_components(self, edges: pa.Table) -> pa.Table:
        schema = pa.schema([pa.field("node", pa.uint64()), pa.field("root", pa.uint64())])
        if edges.num_rows == 0:
            return schema.empty_table()
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        a = edges.column("a").to_numpy()
        b = edges.column("b").to_numpy()
        nodes = sorted_unique(np.concatenate([a, b]))
        n = len(nodes)
        ia, ib = np.searchsorted(nodes, a), np.searchsorted(nodes, b)
        graph = coo_matrix((np.ones(len(a), np.int8), (ia, ib)), (n, n))
        count, labels = connected_components(graph, directed=False)
        # nodes are sorted, so a label's first node is its component's smallest `_order`
        first = np.full(count, n, np.int64)
        np.minimum.at(first, labels, np.arange(n))
        root = nodes[first[labels]]
        return pa.table({"node": nodes, "root": root}, schema=schema)

    def lookup(self, orders: pa.Array, columns: list[str]) -> pa.Table:
        wanted = pl.Series(np.asarray(orders, dtype=np.uint64), dtype=pl.UInt64)
        if not self.frames:
            raise ValueError("lookup: no summaries")
        found = (
            self._scan()
            .select(ORDER, *columns)
            .filter(pl.col(ORDER).is_in(wanted.implode()))
            .sort(ORDER)
            .collect(engine="streaming")
        )
        return found.to_arrow()

"""Collective operations for the local engine: polars over the staged summary files."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa

from curate.engines.collective import Summaries
from curate.stages.base import ORDER


class LocalSummaries(Summaries):
    """Summary rows held by this process: Arrow IPC files spilled by each partition, scanned
    lazily by polars, or in-memory tables (for `Pipeline.process` on small data)."""

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

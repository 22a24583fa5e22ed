"""Dropping forgotten documents from rows by id, where a run writes them (worker side).

A run passes the ids it excludes (`curate.forget.resolve`) in its settings, sorted;
`curate.engines.tasks` drops them where the shard writer takes the rows, from the rows a
pass writes as rejected, and keeps no stage-cache entry of rows for a partition holding
one.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from curate.io.batches import ID

Rows = TypeVar("Rows", pa.RecordBatch, pa.Table)


@lru_cache(maxsize=4)
def _value_set(excluded: tuple[str, ...]) -> pa.Array:
    return pa.array(excluded, pa.string())


def hits(rows: pa.RecordBatch | pa.Table, excluded: tuple[str, ...], column: str = ID) -> pa.Array:
    """Which rows are excluded (a boolean array)."""
    values = rows.column(column)
    if values.type != pa.string():
        values = values.cast(pa.string())
    return pc.is_in(values, value_set=_value_set(excluded)).fill_null(False)


def without(rows: Rows, excluded: tuple[str, ...], column: str = ID) -> tuple[Rows, int]:
    """The rows less the excluded ones, and how many went."""
    if not excluded or rows.num_rows == 0 or column not in rows.schema.names:
        return rows, 0
    hit = hits(rows, excluded, column)
    n = pc.sum(hit).as_py() or 0
    if not n:
        return rows, 0
    return rows.filter(pc.invert(hit)), int(n)

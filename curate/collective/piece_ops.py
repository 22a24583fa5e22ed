"""The piece functions the collective operations are made of, one table in, one table out.

Each runs on one piece of a shuffled table, in whatever process the engine chooses, and
sees only that piece: a bucket of rows with equal keys, or the rows of a range of data
partitions. They are module-level and pure, so every engine can ship them and run them
twice, and the same rows give the same result on every engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate.collective.pieces import concat, key_hash, load, runs
from curate.io.batches import ID, ORDER
from curate.sorted_sets import sorted_unique, unique_pairs

EDGES_SCHEMA = pa.schema([pa.field("a", pa.uint64()), pa.field("b", pa.uint64())])
FIRSTS_SCHEMA = pa.schema(
    [pa.field("id", pa.string()), pa.field(ORDER, pa.uint64()), pa.field("first_id", pa.string())]
)
SLOT = "_slot"
SLOT_HASH = "_slot_hash"


# -- small folds ------------------------------------------------------------------------


def num_rows(table: pa.Table) -> int:
    return int(table.num_rows)


def nbytes(table: pa.Table) -> int:
    return int(table.nbytes)


def identity(table: pa.Table) -> pa.Table:
    return table


def first_value(table: pa.Table) -> Any:
    return table.column(0)[0].as_py() if table.num_rows else None


def column_sum(table: pa.Table, column: str) -> int:
    return int(pc.sum(table.column(column)).as_py() or 0) if table.num_rows else 0


# -- group by key -----------------------------------------------------------------------


def valid_keys(table: pa.Table, key: str) -> pa.Table:
    """Rows with a key: a null key equals no other."""
    return table.filter(pc.is_valid(table.column(key)))


def repeated_ids(table: pa.Table) -> pa.Table:
    """The smallest id of this bucket held by two rows (or no row)."""
    empty = pa.table({ID: pa.array([], pa.string())})
    if table.num_rows < 2:
        return empty
    ids = table.select([ID]).sort_by(ID)
    again = ~runs(ids, [ID])
    return ids.slice(int(np.argmax(again)), 1).cast(empty.schema) if again.any() else empty


def firsts(table: pa.Table, key: str) -> pa.Table:
    """For each key in this bucket, its rows after the first in input order."""
    if table.num_rows == 0:
        return FIRSTS_SCHEMA.empty_table()
    rows = table.take(pc.sort_indices(table, [(key, "ascending"), (ORDER, "ascending")]))
    new = runs(rows, [key])
    first_row = np.flatnonzero(new)[np.cumsum(new) - 1]
    later = pa.array(~new)
    ids = rows.column(ID).combine_chunks()
    out = pa.table(
        {
            "id": ids.filter(later),
            ORDER: rows.column(ORDER).filter(later),
            "first_id": ids.take(pa.array(first_row)).filter(later),
        }
    )
    return out.cast(FIRSTS_SCHEMA)


def slots(table: pa.Table, keys: list[str]) -> pa.Table:
    """(slot, key, `_order`, hash) rows for every non-null key of every key column."""
    pieces = []
    for slot, key in enumerate(keys):
        col = table.column(key)
        valid = pc.is_valid(col)
        n = pc.sum(valid).as_py() or 0
        pieces.append(
            pa.table(
                {
                    SLOT: pa.array(np.full(n, slot, np.uint16)),
                    "key": col.filter(valid),
                    ORDER: table.column(ORDER).filter(valid),
                }
            )
        )
    rows = concat(pieces)
    if not rows.num_columns:
        return pa.table({SLOT: pa.array([], pa.uint16()), "key": [], ORDER: [], SLOT_HASH: []})
    hashes = key_hash(rows.column("key")) ^ (rows.column(SLOT).to_numpy().astype(np.uint64) << 48)
    return rows.append_column(SLOT_HASH, pa.array(hashes, pa.uint64()))


def stars(table: pa.Table) -> pa.Table:
    """Edges from each (slot, key) group's first row to the others, each pair once."""
    if table.num_rows == 0:
        return EDGES_SCHEMA.empty_table()
    by = [(SLOT, "ascending"), ("key", "ascending"), (ORDER, "ascending")]
    rows = table.take(pc.sort_indices(table, by))
    new = runs(rows, [SLOT, "key"])
    order = rows.column(ORDER).to_numpy()
    first = order[np.flatnonzero(new)[np.cumsum(new) - 1]]
    a, b = unique_pairs(first[~new], order[~new])
    return pa.table({"a": a, "b": b}, schema=EDGES_SCHEMA)


def unique_edges(table: pa.Table, _range: tuple[int, int], _side: None) -> pa.Table:
    if table.num_rows == 0:
        return EDGES_SCHEMA.empty_table()
    a, b = unique_pairs(table.column("a").to_numpy(), table.column("b").to_numpy())
    return pa.table({"a": a, "b": b}, schema=EDGES_SCHEMA)


# -- joins by `_order` ------------------------------------------------------------------


def source_rows(source: Any, columns: list[str], wanted: np.ndarray) -> pa.Table:
    """`_order` and `columns` of the rows of one summary source whose `_order` is wanted."""
    table = load(source).select([ORDER, *columns])
    hit = pc.is_in(table.column(ORDER), value_set=pa.array(wanted, pa.uint64()))
    return table.filter(hit)


def join_rows(
    table: pa.Table,
    _range: tuple[int, int],
    sources: list[Any],
    on: str,
    columns: list[str],
    names: list[str],
) -> pa.Table:
    """`table` with `columns` of the summary row whose `_order` is its `on`, as `names`."""
    keys = table.column(on).to_numpy() if table.num_rows else np.zeros(0, np.uint64)
    wanted = sorted_unique(keys)
    found = concat([source_rows(s, columns, wanted) for s in sources])
    if found.num_columns:
        found = found.sort_by(ORDER)
        have = found.column(ORDER).to_numpy()
    else:
        have = np.zeros(0, np.uint64)
    at = np.searchsorted(have, keys)
    if len(keys) and (at.max() >= len(have) or not np.array_equal(have[at], keys)):
        raise ValueError(f"join on {on}: rows not in the summaries")
    take = pa.array(at, pa.int64())
    for column, name in zip(columns, names, strict=True):
        if found.num_columns:
            values = found.column(column).combine_chunks().take(take)
        else:
            values = pa.array([], pa.null())
        table = table.append_column(name, values)
    return table


def score(
    table: pa.Table, fn: Callable[[pa.Array, np.ndarray, np.ndarray], np.ndarray]
) -> pa.Table:
    """`a`, `b` and `fn`'s score of their values (`_va`, `_vb`)."""
    n = table.num_rows
    out = pa.table({"a": table.column("a"), "b": table.column("b")}).cast(EDGES_SCHEMA)
    if n == 0:
        return out.append_column("score", pa.array([], pa.float64()))
    values = pa.concat_arrays(
        [table.column("_va").combine_chunks(), table.column("_vb").combine_chunks()]
    )
    scores = fn(values, np.arange(n), np.arange(n, 2 * n))
    return out.append_column("score", pa.array(np.asarray(scores, np.float64)))


def at_least(table: pa.Table, threshold: float) -> pa.Table:
    """The pairs scored at or above `threshold`, as edges."""
    if table.num_rows == 0:
        return EDGES_SCHEMA.empty_table()
    keep = pc.greater_equal(table.column("score"), threshold)
    return table.filter(keep).select(["a", "b"])

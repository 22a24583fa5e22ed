"""The piece functions of line_dedup's decision, one table in, one table out.

The summary holds, per document, the hashes of its counted units (`HASHES`, in order)
and its number of non-blank units (`NONBLANK`). The decision is two shuffles:

1. `explode` turns each document into one row per counted unit (hash, `_order`, its
   position `k`, the document's `NONBLANK`: 24 bytes), grouped by hash; `repeated` then
   sees every occurrence of a hash in one piece, counts the distinct documents holding
   it, and for a hash held by more than `max_documents` returns the occurrences to
   remove (all of them, or all but the first in input order).
2. Those rows go to their document's partition (`by_partition` on `_order`), where
   `per_document` gathers each document's positions: a document that loses every
   non-blank unit is dropped (reason `all_repeated`), any other gets a row without a
   reason listing what its `apply` removes. Ids come from the summaries of those
   partitions only.

No piece holds more than one bucket of rows, whatever the corpus: memory is the
collective's budget, not the number of lines (see `benchmarks/line_dedup_memory.py`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate.collective.piece_ops import source_rows
from curate.collective.pieces import concat
from curate.io.batches import ID, ORDER

HASHES = "unit_hashes"
NONBLANK = "nonblank_units"
REMOVE = "remove_units"
HASH = "hash"
K = "k"
ROW_BYTES = 24
"""Bytes of one exploded row: hash, `_order`, position, non-blank units."""
DROPPED = "all_repeated"

EXPLODED = pa.schema(
    [
        pa.field(HASH, pa.uint64()),
        pa.field(ORDER, pa.uint64()),
        pa.field(K, pa.uint32()),
        pa.field(NONBLANK, pa.uint32()),
    ]
)
REMOVE_FIELD = pa.field(REMOVE, pa.list_(pa.uint32()))


def list_values(table: pa.Table) -> int:
    """How many unit hashes this piece of summaries holds (for the shuffle's size)."""
    if table.num_rows == 0:
        return 0
    return int(pc.sum(pc.list_value_length(table.column(HASHES))).as_py() or 0)


def explode(table: pa.Table) -> pa.Table:
    """One row per counted unit of every document of this piece."""
    if table.num_rows == 0:
        return EXPLODED.empty_table()
    lists = table.column(HASHES).combine_chunks()
    hashes = pc.list_flatten(lists).to_numpy().astype(np.uint64)
    parent = pc.list_parent_indices(lists).to_numpy()
    lengths = pc.list_value_length(lists).fill_null(0).to_numpy().astype(np.int64)
    starts = np.cumsum(lengths) - lengths
    k = np.arange(len(hashes), dtype=np.int64) - np.repeat(starts, lengths)
    orders = table.column(ORDER).to_numpy()
    nonblank = table.column(NONBLANK).to_numpy()
    return pa.table(
        {
            HASH: hashes,
            ORDER: orders[parent].astype(np.uint64),
            K: k.astype(np.uint32),
            NONBLANK: nonblank[parent].astype(np.uint32),
        },
        schema=EXPLODED,
    )


def repeated(table: pa.Table, max_documents: int, keep_first: bool) -> pa.Table:
    """The occurrences to remove among every occurrence of this piece's hashes."""
    if table.num_rows == 0:
        return EXPLODED.empty_table()
    h = table.column(HASH).to_numpy()
    o = table.column(ORDER).to_numpy()
    k = table.column(K).to_numpy()
    sort = np.lexsort((k, o, h))
    h, o = h[sort], o[sort]
    new_hash = np.ones(len(h), bool)
    new_hash[1:] = h[1:] != h[:-1]
    new_doc = new_hash.copy()
    new_doc[1:] |= o[1:] != o[:-1]
    starts = np.flatnonzero(new_hash)
    documents = np.add.reduceat(new_doc.astype(np.int64), starts)
    run = np.cumsum(new_hash) - 1  # each row's hash run
    remove = documents[run] > max_documents
    if keep_first:
        remove &= ~new_hash  # the first occurrence in input order stays
    take = pa.array(sort[remove])
    return table.take(take).cast(EXPLODED)


def distinct_hashes(table: pa.Table) -> int:
    """Distinct hashes among this piece's rows (a piece holds all rows of its hashes)."""
    if table.num_rows == 0:
        return 0
    return len(np.unique(table.column(HASH).to_numpy()))


def per_document(
    table: pa.Table, _range: tuple[int, int], sources: list[Any], stage: str, schema: pa.Schema
) -> pa.Table:
    """Decision rows of this piece's documents (`schema`: the stage's decision schema):
    dropped when nothing non-blank is left, else the positions `apply` removes."""
    if table.num_rows == 0:
        return schema.empty_table()
    o = table.column(ORDER).to_numpy()
    k = table.column(K).to_numpy()
    nonblank = table.column(NONBLANK).to_numpy()
    sort = np.lexsort((k, o))
    o, k, nonblank = o[sort], k[sort], nonblank[sort]
    new = np.ones(len(o), bool)
    new[1:] = o[1:] != o[:-1]
    starts = np.flatnonzero(new)
    gone = np.diff(np.append(starts, len(o)))
    docs = o[starts]
    empty = gone >= nonblank[starts]
    found = concat([source_rows(s, [ID], docs) for s in sources]).sort_by(ORDER)
    have = found.column(ORDER).to_numpy()
    at = np.searchsorted(have, docs)
    if at.max() >= len(have) or not np.array_equal(have[at], docs):
        raise ValueError("line_dedup: decision rows for documents not in the summaries")
    ids = found.column(ID).combine_chunks().take(pa.array(at))
    offsets = np.append(starts, len(o)).astype(np.int32)
    lists = pa.ListArray.from_arrays(pa.array(offsets), pa.array(k, pa.uint32()))
    n = len(docs)
    return pa.table(
        {
            ID: ids,
            "stage": pa.array([stage] * n, pa.string()),
            "reason": pa.array([DROPPED if e else None for e in empty], pa.string()),
            "duplicate_of": pa.nulls(n, pa.string()),
            "similarity": pa.nulls(n, pa.float32()),
            ORDER: pa.array(docs, pa.uint64()),
            REMOVE: pc.if_else(pa.array(empty), pa.nulls(n, lists.type), lists),
        },
        schema=schema,
    )

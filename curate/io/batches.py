"""The record-batch shape every reader produces and every stage receives.

Readers emit `id` and `text` as plain Arrow `string` (never `large_string` or
`string_view`), followed by the metadata fields the recipe asked to keep, cast
to the types it declared. Fixing the schema here is what lets every shard of a
version share one schema, which `datasets.load_from_disk` requires.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

ID = "id"
TEXT = "text"

ORDER = "_order"
"""Hidden column beside `id` while a run stages documents (never in a shard): the document's
position in input order, `partition << ORDER_SHIFT | row`, where `partition` is the
partition's index in this run's plan. Barriers key their decisions on it (input order breaks
their ties), and the collective operations route rows to the partition it points into.

The index is this run's only: files a run leaves (staged rows, summaries, decisions) hold
the row bits alone (`local_orders`), and the index is put back when a run reads them
(`with_partition`), so a partition's files do not change when inputs before it do."""

LINE = "_line"
"""Hidden column beside `_order` from the reader to the shard writer (never in a shard): where
the document's record is in its input, numbered as quarantine numbers records (a JSONL
line, 1-based, in the file; a Parquet/Arrow/CSV/JSON-array row, 1-based); null where the
format has none (a text file, chat records). The shard writer keeps it in the version's
lineage (`curate.lineage`). It rides with the rows through stages, staging and the stage
cache, so a replayed run writes the same lineage."""

OFFSET = "_offset"
"""Hidden column beside `_line`: the byte where the record's line starts (plain JSONL: in the
file; .gz/.zst: in the decompressed stream); null for other formats."""

LOCATION = (LINE, OFFSET)

CHANGED = "_changed"
"""Hidden column beside `_line` (uint64): bit p is set when the map stage at recipe position p
changed the document's text (`curate.stages.chain.run_maps`), for lineage."""

PII_FOUND = "_pii"
"""Hidden column beside `_line` (string, null when none): the PII a `pii` stage found in the
document, as `TYPE start-end` items joined by `;` (character positions in the text as that
stage saw it; `m<k>:` before a conversation's k-th message). Never a value."""

LINEAGE = (LINE, OFFSET, CHANGED, PII_FOUND)
"""Every hidden column a located read adds: never in a shard."""

ORDER_SHIFT = 40
"""Low bits of `_order` that number a row within its partition: a trillion rows per partition,
16 million partitions."""

_ROW_BITS = np.uint64((1 << ORDER_SHIFT) - 1)


def order_column(partition: int, start: int, count: int) -> np.ndarray:
    """The `_order` values of rows `start .. start + count - 1` of a partition."""
    return (np.uint64(partition) << np.uint64(ORDER_SHIFT)) + np.arange(
        start, start + count, dtype=np.uint64
    )


def partition_of(orders: np.ndarray) -> np.ndarray:
    """The data partition each `_order` value points into."""
    return (orders >> np.uint64(ORDER_SHIFT)).astype(np.int64)


Rows = TypeVar("Rows", pa.RecordBatch, pa.Table)


def local_orders(rows: Rows) -> Rows:
    """`rows` with `_order` holding only the row within the partition: how files keep it."""
    return _map_orders(rows, lambda orders: orders & _ROW_BITS)


def with_partition(rows: Rows, partition: int) -> Rows:
    """`rows` read from a partition's file, with `_order` pointing into the partition again
    (its index in this run put into the high bits; an `_order` that has them is unchanged)."""
    high = np.uint64(partition) << np.uint64(ORDER_SHIFT)
    return _map_orders(rows, lambda orders: orders | high)


def _map_orders(rows: Rows, fn: Callable[[np.ndarray], np.ndarray]) -> Rows:
    at = rows.schema.get_field_index(ORDER)
    if at < 0:
        return rows
    column = rows.column(at)
    values = (column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column).to_numpy(
        zero_copy_only=False
    )
    return rows.set_column(at, rows.schema.field(at), pa.array(fn(values), pa.uint64()))


@dataclass(frozen=True)
class FieldSpec:
    """Which input fields become the document's id, text and kept metadata."""

    text_field: str = "text"
    id_field: str | None = None
    keep_fields: dict[str, pa.DataType] = field(default_factory=dict)
    chat: Any = None
    """A `curate.chat.ChatInput` when the inputs are chat records: `messages` replaces `text`."""

    def schema(self) -> pa.Schema:
        if self.chat is not None:
            return self.chat.batch_schema(self.keep_fields)
        fields = [pa.field(ID, pa.string()), pa.field(TEXT, pa.string())]
        fields += [pa.field(name, dtype) for name, dtype in self.keep_fields.items()]
        return pa.schema(fields)


@dataclass(frozen=True)
class QuarantineRecord:
    """A piece of input that could not become a document. Never holds the content itself."""

    file: str
    line: int | None
    reason: str
    nbytes: int = 0
    fields: tuple[str, ...] | None = None
    """When a field was missing or of the wrong type: the names of the fields the record did
    have (never values), for the message that says a setting is wrong. Not written out."""
    offset: int | None = None
    """Where a JSONL line starts: in the file (plain JSONL, as in its records' derived ids),
    in the decompressed stream (.gz, .zst); None for other inputs."""


FIELD_NAMES_KEPT = 20
FIELD_NAME_CHARS = 64


def field_names(record: dict[str, Any]) -> tuple[str, ...]:
    """A record's first field names, each cut short: keys are names, but a hostile input can
    make them long or many."""
    names = []
    for i, key in enumerate(record):
        if i == FIELD_NAMES_KEPT:
            break
        names.append(str(key)[:FIELD_NAME_CHARS])
    return tuple(sorted(names))


QUARANTINE_SCHEMA = pa.schema(
    [
        pa.field("file", pa.string()),
        pa.field("line", pa.int64()),
        pa.field("reason", pa.string()),
        pa.field("bytes", pa.int64()),
        pa.field("offset", pa.int64()),
    ]
)


def quarantine_table(records: list[QuarantineRecord]) -> pa.Table:
    return pa.table(
        {
            "file": [r.file for r in records],
            "line": [r.line for r in records],
            "reason": [r.reason for r in records],
            "bytes": [r.nbytes for r in records],
            "offset": [r.offset for r in records],
        },
        schema=QUARANTINE_SCHEMA,
    )


@dataclass
class ReadChunk:
    """One batch of documents read from a partition, and what had to be set aside on the way."""

    batch: pa.RecordBatch
    quarantined: list[QuarantineRecord] = field(default_factory=list)
    lines: Any = None
    """Where each row's record is (`LINE`: numpy int64, a JSONL line numbered from 1 at the
    partition's first line), when the reader knows; `reading` makes the hidden columns."""
    offsets: Any = None
    """Where each row's line starts (`OFFSET`: numpy int64), when the reader knows."""

"""Cutting and joining record batches so each carries about `batch_bytes` of text.

Columnar inputs come in whatever batch sizes their writer chose: a few rows of
huge documents or a million tiny ones. Stages see steadier memory and per-batch
overhead when every batch holds about the same amount of text, so readers cut
big batches before converting them and join small converted ones after.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from curate.io.batches import TEXT, QuarantineRecord, ReadChunk
from curate.io.records import empty_batch


def text_bytes(column: pa.Array) -> int:
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    total = pc.sum(pc.binary_length(column)).as_py()
    return int(total or 0)


def slices_by_bytes(
    batch: pa.RecordBatch, column: str, batch_bytes: int
) -> Iterator[pa.RecordBatch]:
    """Zero-copy slices of `batch`, each ending at the row that reaches batch_bytes of text."""
    col = batch.column(column)
    if batch.num_rows <= 1 or text_bytes(col) <= batch_bytes:
        yield batch
        return
    import numpy as np

    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    lengths = pc.fill_null(pc.binary_length(col), 0).to_numpy(zero_copy_only=False)
    cumulative = np.cumsum(lengths, dtype=np.int64)
    start, done = 0, 0
    while start < batch.num_rows:
        stop = int(np.searchsorted(cumulative, done + batch_bytes, side="left")) + 1
        stop = min(max(stop, start + 1), batch.num_rows)
        yield batch.slice(start, stop - start)
        done = int(cumulative[stop - 1])
        start = stop


class Rebatcher:
    """Joins converted batches until they hold batch_bytes of text, keeping their quarantine."""

    def __init__(self, schema: pa.Schema, batch_bytes: int) -> None:
        self.schema = schema
        self.batch_bytes = batch_bytes
        self._batches: list[pa.RecordBatch] = []
        self._quarantined: list[QuarantineRecord] = []
        self._bytes = 0

    def add(
        self, batch: pa.RecordBatch, quarantined: list[QuarantineRecord]
    ) -> Iterator[ReadChunk]:
        if batch.num_rows:
            self._batches.append(batch)
            self._bytes += text_bytes(batch.column(TEXT))
        self._quarantined.extend(quarantined)
        if self._bytes >= self.batch_bytes:
            yield self._flush()

    def finish(self) -> Iterator[ReadChunk]:
        if self._batches or self._quarantined:
            yield self._flush()

    def _flush(self) -> ReadChunk:
        if len(self._batches) == 1:
            batch = self._batches[0]
        else:
            table = pa.Table.from_batches(self._batches, self.schema).combine_chunks()
            batches = table.to_batches()
            batch = batches[0] if batches else empty_batch(self.schema)
        chunk = ReadChunk(batch, self._quarantined)
        self._batches, self._quarantined, self._bytes = [], [], 0
        return chunk

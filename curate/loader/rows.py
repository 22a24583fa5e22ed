"""Whole rows for trainers whose rows differ in length: packed conversations, or documents.

Packed fine-tuning rows (`chat_template` with `pack`) each hold several conversations and
their own boundaries (`position_ids`, `cu_seqlens`), so a trainer reads rows, never
fixed-length windows of a token stream. `Tokens.rows()` gives them in the order
`blocks()` uses (the global stream of `curate.loader.stream`: ranks stride through it and
resume where all ranks together stopped; the logic is `TokenBlocks`'), each row a dict
of numpy views of the memory-mapped shards in their stored types: uint16/uint32 ids,
int32 labels and positions, nothing widened or copied. Under torch the DataLoader gets
writable copies; rows are ragged, so give it a `collate_fn` (concatenating rows into one
padding-free sequence, as `DataCollatorWithFlattening` does, is safe: each row starts a
conversation).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from curate.loader.blocks import TokenBlocks
from curate.loader.stream import SampleOrder


class ListColumn:
    """One list column's chunks as numpy views, so that row i is a slice (no Python lists)."""

    def __init__(self, column: pa.ChunkedArray) -> None:
        chunks = [c for c in column.chunks if len(c)]
        self.offsets = [c.offsets.to_numpy() for c in chunks]
        self.values = [c.values.to_numpy(zero_copy_only=True) for c in chunks]
        self.starts = np.cumsum([0, *(len(c) for c in chunks)])

    def row(self, i: int) -> np.ndarray:
        j = int(np.searchsorted(self.starts, i, side="right")) - 1
        offsets, r = self.offsets[j], i - int(self.starts[j])
        return self.values[j][offsets[r] : offsets[r + 1]]


def list_columns(schema: pa.Schema) -> list[str]:
    """The columns of lists of numbers (ids, labels, loss_mask, position_ids, cu_seqlens)."""
    return [
        f.name
        for f in schema
        if pa.types.is_list(f.type)
        and (pa.types.is_integer(f.type.value_type) or pa.types.is_floating(f.type.value_type))
    ]


def views(table: pa.Table, names: list[str]) -> dict[str, ListColumn]:
    return {name: ListColumn(table.column(name)) for name in names}


class Rows(TokenBlocks):
    """An iterable of whole rows (dicts of numpy views) in a deterministic, resumable order."""

    def __init__(
        self,
        columns: dict[str, ListColumn],
        n_rows: int,
        seed: int,
        epoch: int,
        shuffle: bool,
        rank: int,
        world_size: int,
        position: int = 0,
        dtype: np.dtype[Any] | None = None,
        epochs: int | None = 1,
        order: SampleOrder | None = None,
    ) -> None:
        super().__init__([], np.zeros(1, np.int64), None, n_rows, 0, seed, epoch, shuffle,
                         rank, world_size, position, dtype, epochs, order)  # fmt: skip
        self._columns = columns

    def _read(self, block: int) -> Any:
        return {name: column.row(block) for name, column in self._columns.items()}

    def _cast(self, block: Any) -> Any:
        if self.dtype is None:
            return block
        return {name: values.astype(self.dtype) for name, values in block.items()}

    @staticmethod
    def _own(block: Any) -> Any:
        return {name: TokenBlocks._own(values) for name, values in block.items()}

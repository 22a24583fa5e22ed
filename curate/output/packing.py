"""Packing tokenized documents into fixed-length rows, per partition, in the shard writer.

Packing must see a partition's documents in order, so it runs where the shards are
written, never in a map stage: the rows are then the same whatever the batch sizes of
the engine. Documents are concatenated in input order (each already ends with its EOS
separator when the policy adds one) and cut every `seq_len` tokens; a document may
span rows. No token is dropped or repeated.

A partition's last, short row is not written to its shards: `tail()` hands back the
tokens it would hold (with the documents they belong to), and at publish the tails of
every partition are packed together, in partition order, into one tail shard
(`curate.output.tails`), so a version has at most one short row per split instead of
one per partition.

Each packed row records which documents it holds: `doc_ids` (in order), `doc_starts`
(where each one's tokens begin in the row) and `doc_offsets` (how many tokens of each
came before this row: non-zero for the first, and in the tail shard for a piece that
continues a partition's last full row). All of it is vectorised with numpy.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pyarrow as pa

from curate.errors import CurateError

TOKENS = "input_ids"
NUM_TOKENS = "num_tokens"
DOC_OFFSET = "doc_offset"  # in a tail: tokens of the document written before this piece


@dataclass(frozen=True)
class PackSpec:
    """What the shard writer needs to pack: the row length and the token type."""

    seq_len: int
    id_type: pa.DataType

    def output_schema(self) -> pa.Schema:
        return pa.schema(
            [
                pa.field("id", pa.string()),
                pa.field(TOKENS, pa.list_(self.id_type)),
                pa.field(NUM_TOKENS, pa.int32()),
                pa.field("doc_ids", pa.list_(pa.string())),
                pa.field("doc_starts", pa.list_(pa.int32())),
                pa.field("doc_offsets", pa.list_(pa.int64())),
            ]
        )

    @property
    def kind(self) -> str:
        """What a row holds: a window of the token stream (`tokens`) or whole conversations."""
        return "tokens"

    def tail_schema(self) -> pa.Schema:
        """A partition's tail: the pieces of documents its short last row would hold."""
        return pa.schema(
            [
                pa.field("id", pa.string()),
                pa.field(TOKENS, pa.list_(self.id_type)),
                pa.field(DOC_OFFSET, pa.int64()),
            ]
        )

    def start(self, partition: str, prefix: str = "pack") -> Packer:
        """A packer for one partition; its rows are named `{prefix}-{key}-{row}`, by the
        partition's key (`Partition.key`), so they keep their ids when other inputs change."""
        return Packer(self, f"{prefix}-{partition}")

    def start_tail(self, prefix: str = "pack") -> Packer:
        """The packer of the tail shard; its rows are named `{prefix}-tail-{row}`."""
        return Packer(self, f"{prefix}-tail")


class AsksForPacking(Protocol):
    """A stage as packing sees it (every stage: `Stage.pack_spec` defaults to None)."""

    @property
    def name(self) -> str: ...

    def pack_spec(self) -> PackSpec | None: ...


def packing_for(stages: Sequence[AsksForPacking]) -> PackSpec | None:
    """The packing a recipe asks for: only its last stage may ask (packing ends the data)."""
    found = None
    for i, stage in enumerate(stages):
        spec = stage.pack_spec()
        if spec is None:
            continue
        if i != len(stages) - 1:
            raise CurateError(
                f"stages[{i}] {stage.name} packs rows, so it must be the last stage "
                f"(stages[{i + 1}] {stages[i + 1].name} comes after it)"
            )
        found = spec
    return found


class Packer:
    """Packs one partition: `feed` batches in order, then take its `tail()` (or, for the
    tail shard itself, `flush` the short last row).

    `feed` and `flush` yield `(packed rows, documents ended)`: the number of input
    documents whose last token is in those rows, so the manifest can still count
    documents written (a tail's documents end in the tail shard). A fed batch may carry
    `doc_offset` (a tail's pieces of documents begun elsewhere).
    """

    def __init__(self, spec: PackSpec, name: str) -> None:
        self.spec = spec
        self.name = name  # rows are `{name}-{row:09d}`
        self.rows = 0
        self._tokens = np.empty(0, np.uint32)
        self._ids = pa.array([], pa.string())
        self._lengths = np.empty(0, np.int64)  # tokens of each carried document still to emit
        self._offsets = np.empty(0, np.int64)  # tokens of each carried document already emitted

    def feed(self, batch: pa.RecordBatch) -> Iterator[tuple[pa.RecordBatch, int]]:
        column = batch.column(TOKENS)
        lengths = np.diff(column.offsets.to_numpy()).astype(np.int64)
        if (lengths == 0).any():
            raise CurateError("packing: a document has no tokens (tokenize removes empty ones)")
        values = column.flatten().to_numpy(zero_copy_only=False)
        if DOC_OFFSET in batch.schema.names:
            offsets = batch.column(DOC_OFFSET).to_numpy(zero_copy_only=False).astype(np.int64)
        else:
            offsets = np.zeros(len(lengths), np.int64)
        self._tokens = np.concatenate([self._tokens, values.astype(np.uint32, copy=False)])
        self._ids = pa.concat_arrays([self._ids, batch.column("id").cast(pa.string())])
        self._lengths = np.concatenate([self._lengths, lengths])
        self._offsets = np.concatenate([self._offsets, offsets])
        yield from self._emit(final=False)

    def flush(self) -> Iterator[tuple[pa.RecordBatch, int]]:
        """Everything carried as rows, the last one short (the tail shard's)."""
        yield from self._emit(final=True)

    def tail(self) -> pa.RecordBatch:
        """What the short last row would hold, as pieces of documents (`tail_schema`); the
        packer is then empty. A partition stages this instead of writing a short row."""
        offsets = np.concatenate([[0], np.cumsum(self._lengths)]).astype(np.int32)
        id_type = self.spec.id_type
        tokens = pa.array(self._tokens.astype(id_type.to_pandas_dtype()), id_type)
        out = pa.RecordBatch.from_arrays(
            [
                self._ids,
                pa.ListArray.from_arrays(pa.array(offsets), tokens),
                pa.array(self._offsets, pa.int64()),
            ],
            schema=self.spec.tail_schema(),
        )
        self._tokens = self._tokens[:0]
        self._ids = self._ids.slice(0, 0)
        self._lengths, self._offsets = self._lengths[:0], self._offsets[:0]
        return out

    def _emit(self, final: bool) -> Iterator[tuple[pa.RecordBatch, int]]:
        L = self.spec.seq_len
        tokens, ids, lengths, offsets = self._tokens, self._ids, self._lengths, self._offsets
        total = len(tokens)
        n_rows = -(-total // L) if final else total // L
        cut = total if final else n_rows * L
        ends = np.cumsum(lengths)
        starts = ends - lengths
        done = int(np.searchsorted(ends, cut, side="right")) if len(ends) else 0
        if n_rows:
            yield self._rows(tokens[:cut], ids, starts, ends, offsets, n_rows), done
        # Carry what is left: the documents not yet finished, and their unwritten tokens.
        self._tokens = tokens[cut:]
        self._ids = ids.slice(done)
        rest_starts = np.maximum(starts[done:], cut)
        self._lengths = ends[done:] - rest_starts
        self._offsets = offsets[done:] + (rest_starts - starts[done:])

    def _rows(
        self,
        tokens: np.ndarray,
        ids: pa.Array,
        starts: np.ndarray,
        ends: np.ndarray,
        offsets: np.ndarray,
        n: int,
    ) -> pa.RecordBatch:
        L = self.spec.seq_len
        row_start = np.arange(n, dtype=np.int64) * L
        row_end = np.minimum(row_start + L, len(tokens))
        # Documents overlapping row r: those ending after its start and starting before its end.
        first = np.searchsorted(ends, row_start, side="right")
        last = np.searchsorted(starts, row_end, side="left")
        counts = last - first
        member_docs = np.repeat(first - np.cumsum(counts) + counts, counts) + np.arange(
            counts.sum()
        )
        list_offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
        row_of_member = np.repeat(np.arange(n), counts)
        in_row = np.maximum(starts[member_docs] - row_start[row_of_member], 0).astype(np.int32)
        inside = np.maximum(row_start[row_of_member] - starts[member_docs], 0)
        before = offsets[member_docs] + inside  # tokens of each document before this row
        lengths = (row_end - row_start).astype(np.int32)
        token_offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
        row_ids = [f"{self.name}-{self.rows + i:09d}" for i in range(n)]
        self.rows += n
        return pa.RecordBatch.from_arrays(
            [
                pa.array(row_ids, pa.string()),
                pa.ListArray.from_arrays(
                    token_offsets, pa.array(tokens.astype(self.spec.id_type.to_pandas_dtype()))
                ),
                pa.array(lengths, pa.int32()),
                pa.ListArray.from_arrays(list_offsets, ids.take(pa.array(member_docs))),
                pa.ListArray.from_arrays(list_offsets, pa.array(in_row, pa.int32())),
                pa.ListArray.from_arrays(list_offsets, pa.array(before, pa.int64())),
            ],
            schema=self.spec.output_schema(),
        )

"""Packing whole conversations into rows of at most `seq_len` tokens, for fine-tuning.

Pre-training packing (`curate.output.packing`) cuts one token stream every `seq_len` tokens,
so a document may span rows. A conversation must not: attention and loss have to stay
inside it. Here rows are filled greedily in input order (next-fit): a conversation goes
into the current row when it fits, else it starts the next row. No conversation is ever
split, because the `chat_template` stage drops or truncates those longer than `seq_len`
first (its `max_len`/`overlong`, counted in the manifest); a longer one reaching the
packer is an internal error. Like pre-training packing this runs in the shard writer,
per partition, so the rows never depend on how an engine batched the documents. And like
it, a partition's last open row is not written to its shards: its conversations are the
partition's `tail()`, and at publish every partition's tail is packed into one tail shard
(`curate.output.tails`), so the rows left partly empty by partition ends are one per split,
not one per partition (no token is lost either way: `rows()` reads every row).

Rows are left ragged (no padding): `num_tokens` says how long each is. Trainers using
flash-attention's variable-length kernels want exactly this, and a collator that pads
can still do so per batch with `labels = -100` at the padding.

Each row carries what a trainer needs to keep every conversation on its own, following
`transformers`' `DataCollatorWithFlattening` (the padding-free collator):

- `position_ids`: 0, 1, ... restarting at each conversation (int32);
- `cu_seqlens`: each conversation's start in the row, then the row's length (int32,
  flash-attention's `cu_seq_lens` for the row);
- `labels`: the conversation's own labels with the *first* position of each conversation
  set to -100, as that collator's `separator_id` does, so no loss term predicts a
  conversation's first token from the previous one (with `loss_mask`: 0 there);
- `doc_ids`: the conversations in the row, in order.

Nothing is lost or duplicated: the rows' tokens are the conversations' tokens in input
order, and `num_tokens` sums to the same total.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from curate.errors import CurateError
from curate.output.packing import NUM_TOKENS, TOKENS, PackSpec

POSITION_IDS = "position_ids"
CU_SEQLENS = "cu_seqlens"
DOC_IDS = "doc_ids"
IGNORE = -100


@dataclass(frozen=True)
class ChatPackSpec(PackSpec):
    """Packing of whole conversations; `target` is the loss column (`labels` or `loss_mask`)."""

    target: str = "labels"

    def target_type(self) -> pa.DataType:
        return pa.int32() if self.target == "labels" else pa.uint8()

    def output_schema(self) -> pa.Schema:
        return pa.schema(
            [
                pa.field("id", pa.string()),
                pa.field(TOKENS, pa.list_(self.id_type)),
                pa.field(self.target, pa.list_(self.target_type())),
                pa.field(POSITION_IDS, pa.list_(pa.int32())),
                pa.field(CU_SEQLENS, pa.list_(pa.int32())),
                pa.field(DOC_IDS, pa.list_(pa.string())),
                pa.field(NUM_TOKENS, pa.int32()),
            ]
        )

    @property
    def kind(self) -> str:
        return "conversations"

    def tail_schema(self) -> pa.Schema:
        """A partition's tail: its open row's conversations, whole, with their own labels."""
        return pa.schema(
            [
                pa.field("id", pa.string()),
                pa.field(TOKENS, pa.list_(self.id_type)),
                pa.field(self.target, pa.list_(self.target_type())),
            ]
        )

    def start(self, partition: str, prefix: str = "pack") -> ChatPacker:  # type: ignore[override]
        return ChatPacker(self, f"{prefix}-{partition}")

    def start_tail(self, prefix: str = "pack") -> ChatPacker:  # type: ignore[override]
        return ChatPacker(self, f"{prefix}-tail")


class ChatPacker:
    """Packs one partition's conversations: `feed` batches in order, then take the open
    row's conversations as its `tail()` (or, for the tail shard itself, `flush` them).

    Both yield `(rows, conversations in them)`. The open row's conversations are carried
    to the next batch (the next conversation may still fit), so the state is at most one
    row of tokens; it pickles, for the engine's checkpoints.
    """

    def __init__(self, spec: ChatPackSpec, name: str) -> None:
        self.spec = spec
        self.name = name  # rows are `{name}-{row:09d}`
        self.rows = 0
        self._tokens = np.empty(0, spec.id_type.to_pandas_dtype())
        self._target = np.empty(0, spec.target_type().to_pandas_dtype())
        self._ids = pa.array([], pa.string())
        self._lengths = np.empty(0, np.int64)

    def feed(self, batch: pa.RecordBatch) -> Iterator[tuple[pa.RecordBatch, int]]:
        tokens = batch.column(TOKENS)
        lengths = np.diff(tokens.offsets.to_numpy()).astype(np.int64)
        if (lengths == 0).any():
            raise CurateError("packing: a conversation has no tokens")
        if (lengths > self.spec.seq_len).any():
            raise CurateError(
                f"packing: a conversation of {int(lengths.max())} tokens is longer than "
                f"seq_len {self.spec.seq_len} (the chat_template stage's max_len must drop or "
                "truncate it first)"
            )
        values = tokens.flatten().to_numpy(zero_copy_only=False)
        target = batch.column(self.spec.target).flatten().to_numpy(zero_copy_only=False)
        self._tokens = np.concatenate([self._tokens, values.astype(self._tokens.dtype)])
        self._target = np.concatenate([self._target, target.astype(self._target.dtype)])
        self._ids = pa.concat_arrays([self._ids, batch.column("id").cast(pa.string())])
        self._lengths = np.concatenate([self._lengths, lengths])
        yield from self._emit(final=False)

    def flush(self) -> Iterator[tuple[pa.RecordBatch, int]]:
        yield from self._emit(final=True)

    def tail(self) -> pa.RecordBatch:
        """The open row's conversations (`tail_schema`), unmasked; the packer is then empty."""
        spec = self.spec
        offsets = pa.array(np.concatenate([[0], np.cumsum(self._lengths)]).astype(np.int32))
        out = pa.RecordBatch.from_arrays(
            [
                self._ids,
                pa.ListArray.from_arrays(offsets, pa.array(self._tokens, spec.id_type)),
                pa.ListArray.from_arrays(offsets, pa.array(self._target, spec.target_type())),
            ],
            schema=spec.tail_schema(),
        )
        self._tokens, self._target = self._tokens[:0], self._target[:0]
        self._ids, self._lengths = self._ids.slice(0, 0), self._lengths[:0]
        return out

    def _emit(self, final: bool) -> Iterator[tuple[pa.RecordBatch, int]]:
        firsts = self._row_starts(final)
        if len(firsts) < 2:
            return
        done = int(firsts[-1])  # conversations in complete rows
        cut = int(self._lengths[:done].sum())
        yield self._rows(firsts, cut), done
        self._tokens, self._target = self._tokens[cut:], self._target[cut:]
        self._ids, self._lengths = self._ids.slice(done), self._lengths[done:]

    def _row_starts(self, final: bool) -> np.ndarray:
        """Index of each complete row's first conversation, then one past the last one.

        Next-fit: a row takes conversations while they fit. One loop step per row (not per
        conversation or token): the last conversation that fits is a binary search.
        """
        L, ends = self.spec.seq_len, np.cumsum(self._lengths)
        n, i, firsts = len(ends), 0, [0]
        while i < n:
            base = int(ends[i - 1]) if i else 0
            j = int(np.searchsorted(ends, base + L, side="right"))
            if j == n and not final and int(ends[-1]) - base < L:
                break  # the open row: the next batch's first conversation may still fit
            firsts.append(j)
            i = j
        return np.asarray(firsts, np.int64)

    def _rows(self, firsts: np.ndarray, cut: int) -> pa.RecordBatch:
        lengths = self._lengths[: firsts[-1]]
        n_docs, n_rows = len(lengths), len(firsts) - 1
        doc_ends = np.cumsum(lengths)
        doc_starts = doc_ends - lengths
        row_bounds = np.concatenate([[0], doc_ends[firsts[1:] - 1]])  # token offsets of rows
        tokens = self._tokens[:cut]
        target = self._target[:cut].copy()
        target[doc_starts] = IGNORE if self.spec.target == "labels" else 0
        positions = (np.arange(cut, dtype=np.int64) - np.repeat(doc_starts, lengths)).astype(
            np.int32
        )
        docs_per_row = np.diff(firsts)
        row_of_doc = np.repeat(np.arange(n_rows), docs_per_row)
        # cu_seqlens of row r: 0, then the end of each of its conversations, relative to the row.
        cu_offsets = np.concatenate([[0], np.cumsum(docs_per_row + 1)])
        cu = np.zeros(n_docs + n_rows, np.int32)
        cu[np.arange(n_docs) + row_of_doc + 1] = doc_ends - row_bounds[row_of_doc]
        token_offsets = pa.array(row_bounds.astype(np.int32))
        doc_offsets = pa.array(firsts.astype(np.int32))
        row_ids = [f"{self.name}-{self.rows + i:09d}" for i in range(n_rows)]
        self.rows += n_rows
        spec = self.spec
        return pa.RecordBatch.from_arrays(
            [
                pa.array(row_ids, pa.string()),
                pa.ListArray.from_arrays(token_offsets, pa.array(tokens, spec.id_type)),
                pa.ListArray.from_arrays(token_offsets, pa.array(target, spec.target_type())),
                pa.ListArray.from_arrays(token_offsets, pa.array(positions, pa.int32())),
                pa.ListArray.from_arrays(pa.array(cu_offsets.astype(np.int32)), pa.array(cu)),
                pa.ListArray.from_arrays(doc_offsets, self._ids.slice(0, n_docs)),
                pa.array(np.diff(row_bounds).astype(np.int32), pa.int32()),
            ],
            schema=spec.output_schema(),
        )

"""The figures every stage gets without writing a line: measured where the engine calls it.

For each batch a stage is given, the engine's loop (`curate.stages.chain.run_maps`, and
the barrier's apply step in `curate.engines.tasks`) hands the batch before and after the
stage to `measure`, which adds to the stage's statistics:

- `characters_in` / `characters_out` and the histograms `length_in` / `length_out`
  (characters per document, log2 bins): Unicode code points of the text, or on chat
  records of every message's content summed per conversation; absent where the batch has
  no text (after tokenize without keep_text);
- `characters_added` / `characters_removed`: over the documents the stage kept, the sum
  of their positive and of their negative length changes (not an edit distance: a word
  replaced by one as long changes nothing here; `changed` counts such documents);
- `tokens_in` / `tokens_out` and the histogram `tokens_out` (tokens per document) once
  the rows carry `num_tokens` (from the tokenize or chat_template stage on).

All of it is vectorised with pyarrow and numpy: one `utf8_length` over the text column
and a `bincount`, never a Python loop per document.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate.chat.spec import MESSAGES
from curate.io.batches import ORDER
from curate.output.packing import NUM_TOKENS
from curate.stats.bins import LOG2
from curate.stats.container import Stats

CHARACTERS = "characters"
TOKENS = "tokens"


def document_lengths(batch: pa.RecordBatch, text_field: str, chat: bool) -> np.ndarray | None:
    """Characters (code points) per row: its text, or its messages' contents summed;
    None when the batch holds no text."""
    names = batch.schema.names
    if chat:
        if MESSAGES not in names:
            return None
        messages = _array(batch.column(names.index(MESSAGES)))
        flat = pc.list_flatten(messages)
        each = pc.fill_null(pc.utf8_length(pc.struct_field(flat, "content")), 0)
        parents = pc.list_parent_indices(messages).to_numpy(zero_copy_only=False)
        weights = each.to_numpy(zero_copy_only=False).astype(np.int64)
        summed = np.bincount(parents, weights=weights, minlength=batch.num_rows)
        return np.rint(summed).astype(np.int64)
    if text_field not in names:
        return None
    column = _array(batch.column(names.index(text_field)))
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        return None
    lengths = pc.fill_null(pc.utf8_length(column), 0)
    return lengths.to_numpy(zero_copy_only=False).astype(np.int64)


def measure(
    stats: Stats,
    before: pa.RecordBatch,
    after: pa.RecordBatch,
    *,
    text_field: str,
    chat: bool,
    changed: int,
) -> None:
    """Add the generic figures of one stage call (batch `before` in, `after` out)."""
    lin = document_lengths(before, text_field, chat)
    lout = document_lengths(after, text_field, chat)
    if lin is not None:
        stats.count("characters_in", int(lin.sum()))
        stats.histogram("length_in", lin, LOG2, CHARACTERS)
    if lout is not None:
        stats.count("characters_out", int(lout.sum()))
        stats.histogram("length_out", lout, LOG2, CHARACTERS)
    kept = _aligned(lin, before, after) if changed and lin is not None else None
    if kept is not None and lout is not None:
        delta = lout - kept
        stats.count("characters_added", int(delta[delta > 0].sum()))
        stats.count("characters_removed", int(-delta[delta < 0].sum()))
    if NUM_TOKENS in before.schema.names:
        stats.count("tokens_in", int(_tokens(before).sum()))
    if NUM_TOKENS in after.schema.names:
        tokens = _tokens(after)
        stats.count("tokens_out", int(tokens.sum()))
        stats.histogram("tokens_out", tokens, LOG2, TOKENS)


def _aligned(
    lengths: np.ndarray, before: pa.RecordBatch, after: pa.RecordBatch
) -> np.ndarray | None:
    """The `before` lengths of the rows `after` kept, in `after`'s order (joined on the
    partition-unique `_order`; rows dropped by the stage simply have no partner); None
    when the rows cannot be paired (no `_order`)."""
    if after.num_rows == before.num_rows:
        return lengths
    names = before.schema.names
    if ORDER not in names or ORDER not in after.schema.names:
        return None
    where = pc.index_in(after.column(ORDER), value_set=before.column(names.index(ORDER)))
    if where.null_count:
        return None
    return lengths[where.to_numpy(zero_copy_only=False)]


def _tokens(batch: pa.RecordBatch) -> np.ndarray:
    column = batch.column(batch.schema.get_field_index(NUM_TOKENS))
    return pc.fill_null(column, 0).to_numpy(zero_copy_only=False).astype(np.int64)


def _array(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column

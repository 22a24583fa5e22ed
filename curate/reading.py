"""Reading one partition into record batches with exactly `FieldSpec.schema()`.

The one entry point the engines call; it checks that the input is still the one
that was discovered (its stat identity, so a file rewritten mid-run cannot mix two
versions into one dataset) and dispatches by format and kind of record: to the readers
of `curate.io`, or to `curate.chat`'s for chat records. It lives above both packages so
that io never imports chat (chat's reader is built on io's lines and records).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate.errors import CurateError
from curate.input_watch import check
from curate.io.batches import (
    CHANGED,
    ID,
    LINE,
    OFFSET,
    PII_FOUND,
    TEXT,
    FieldSpec,
    QuarantineRecord,
    ReadChunk,
)
from curate.io.columnar import read_columnar
from curate.io.delimited import DELIMITERS, read_delimited
from curate.io.inputs import InputFile
from curate.io.json_array import RecordSink, read_json_array
from curate.io.jsonl import read_jsonl
from curate.io.line_numbers import lines_before
from curate.io.lines import JSONL_FORMATS
from curate.io.partitions import Partition
from curate.io.records import FAIL_HINT, ErrorSink
from curate.io.textfiles import read_text_file, read_text_folder
from curate.reasons import DOCUMENT_TOO_LARGE


def check_inputs(files: list[InputFile], fields: FieldSpec) -> None:
    """Refuse now, before a build writes anything, what `read_partition` would refuse in a
    worker for every partition: a kept field named like a core column, chat records in a
    format the chat reader does not read."""
    clash = {ID, TEXT} & set(fields.keep_fields)
    if clash:
        name = sorted(clash)[0]
        raise CurateError(
            f"kept field {name!r} would replace the document's own column; "
            "rename it in the input or drop it from the recipe's fields",
            at=("fields", name),
        )
    for inp in files:
        if fields.chat is not None and inp.format not in (*JSONL_FORMATS, "json"):
            raise CurateError(
                f"{inp.name}: chat records are read from JSONL (.jsonl, .jsonl.gz, .jsonl.zst) "
                "or a .json array",
                at=("inputs",),
            )


def read_partition(
    part: Partition,
    fields: FieldSpec,
    *,
    on_error: str = "quarantine",
    batch_bytes: int = 8 << 20,
    use_threads: bool = False,
    max_document_bytes: int | None = None,
    locate: bool = False,
) -> Iterator[ReadChunk]:
    """The partition's documents in input order, in batches of about batch_bytes of text.

    Bad records are returned in each chunk's `quarantined` (on_error="quarantine")
    or stop the read with a CurateError naming file and line (on_error="fail").
    `use_threads` lets Arrow parse with its CPU pool (`pa.set_cpu_count`); leave it
    off when the engine already runs one worker process per core. Documents over
    `max_document_bytes`, and JSONL lines over it (skipped unread, however long), are set
    aside as bad records are (`document_too_large`). With `locate`, each batch also has the
    hidden `_line` and `_offset` columns (`located`), which a run keeps as lineage.
    """
    chunks = _read(part, fields, on_error, batch_bytes, use_threads, max_document_bytes)
    if locate:
        chunks = located(part, chunks)
    if max_document_bytes is None:
        yield from chunks
    else:
        yield from _size_limited(chunks, max_document_bytes, part.input.name, on_error)


def _read(
    part: Partition,
    fields: FieldSpec,
    on_error: str,
    batch_bytes: int,
    use_threads: bool,
    max_document_bytes: int | None,
) -> Iterator[ReadChunk]:
    first = part.input.format == "jsonl" and part.start > 0  # lines numbered from 1 in part
    sink = ErrorSink(part.input.name, on_error, partial(lines_before, part) if first else None)
    if batch_bytes < 1:
        raise ValueError(f"batch_bytes must be positive, not {batch_bytes}")
    clash = {ID, TEXT} & set(fields.keep_fields)
    if clash:
        raise CurateError(
            f"kept field {sorted(clash)[0]!r} would replace the document's own column; "
            "rename it in the input or drop it from the recipe's fields"
        )
    fmt = part.input.format
    if fmt == "json":  # records of an array: numbered from 0, quarantined from 1
        sink = RecordSink.like(sink)
    if fields.chat is not None:  # chat records: the chat package maps them to `messages`
        from curate.chat.reader import read_chat_jsonl

        _check_unchanged(part)
        yield from read_chat_jsonl(part, fields, fields.chat, sink, batch_bytes, max_document_bytes)
    elif fmt in JSONL_FORMATS:
        _check_unchanged(part)
        yield from read_jsonl(part, fields, sink, batch_bytes, use_threads, max_document_bytes)
    elif fmt in ("parquet", "arrow", "hf_disk"):
        if fmt != "hf_disk":
            _check_unchanged(part)
        yield from read_columnar(part, fields, sink, batch_bytes, use_threads)
    elif fmt == "json":
        _check_unchanged(part)
        yield from read_json_array(part, fields, sink, batch_bytes, use_threads, max_document_bytes)
    elif fmt in DELIMITERS:
        _check_unchanged(part)
        yield from read_delimited(part, fields, sink, batch_bytes, max_document_bytes)
    elif fmt == "text_file":
        _check_unchanged(part)
        yield from read_text_file(part, fields, sink, max_document_bytes)
    elif fmt == "text_folder":
        yield from read_text_folder(part, fields, sink, batch_bytes, max_document_bytes)
    else:
        raise ValueError(f"unknown input format {fmt!r}")


ROW_FORMATS = ("parquet", "arrow", "hf_disk", *DELIMITERS)
"""Formats whose records are rows numbered without gaps from the partition's first row, so
a chunk's rows are the rows its quarantined records leave (readers number rows as
quarantine does, from 1)."""


def located(part: Partition, chunks: Iterator[ReadChunk]) -> Iterator[ReadChunk]:
    """Each chunk's batch with the hidden `_line` and `_offset` columns (`LOCATION`): what
    the reader said (JSONL, a JSON array), else counted for row formats, else null; and the
    `_changed` and `_pii` columns the stages fill in (`LINEAGE`). A plain
    JSONL partition's lines are numbered from 1 at its first line, as its reader numbers
    them (no line is counted to read a partition: `curate.io.line_numbers`); publish adds
    the lines before it (`curate.lineage.publish`)."""
    row: int | None = part.first_row + 1 if part.input.format in ROW_FORMATS else None
    for chunk in chunks:
        n = chunk.batch.num_rows
        lines, offsets = chunk.lines, chunk.offsets
        if lines is not None and len(lines) != n:
            lines = offsets = None
        if lines is None and row is not None:
            lines, row = _rows(row, n, chunk.quarantined)
        if offsets is not None and len(offsets) != n:
            offsets = None
        batch = chunk.batch.append_column(LINE, _int64(lines, n))
        batch = batch.append_column(OFFSET, _int64(offsets, n))
        batch = batch.append_column(CHANGED, pa.array(np.zeros(n, np.uint64)))
        batch = batch.append_column(PII_FOUND, pa.nulls(n, pa.string()))
        yield ReadChunk(batch, chunk.quarantined)


def _rows(
    first: int, n: int, quarantined: list[QuarantineRecord]
) -> tuple[np.ndarray | None, int | None]:
    """The numbers of a chunk's n rows, from `first`, skipping its quarantined rows, and the
    number after them; (None, None) when the quarantine does not fit that (never wrong)."""
    bad = {q.line for q in quarantined}
    span = n + len(bad)
    if None in bad or any(not first <= b < first + span for b in bad):  # type: ignore[operator]
        return None, None
    numbers = np.arange(first, first + span, dtype=np.int64)
    if bad:
        numbers = numbers[~np.isin(numbers, np.fromiter(bad, np.int64))]
    return numbers, first + span


def _int64(values: np.ndarray | None, n: int) -> pa.Array:
    return pa.nulls(n, pa.int64()) if values is None else pa.array(values, pa.int64())


def _size_limited(
    chunks: Iterator[ReadChunk], limit: int, file: str, on_error: str
) -> Iterator[ReadChunk]:
    """Each chunk without its documents over `limit` bytes, which join its quarantined
    records (size only: no line, no content), or stop the run with on_error=fail.

    JSONL readers set aside a line over the limit before reading it (a document is never
    longer than its line), with its line number; this catches the rest: columnar rows,
    text files, a conversation the recipe's `alpaca_join` made longer than its line."""
    reason = DOCUMENT_TOO_LARGE(limit=limit)
    for chunk in chunks:
        sizes = document_bytes(chunk.batch)
        over = sizes > limit
        if not over.any():
            yield chunk
            continue
        if on_error == "fail":
            raise CurateError(f"{file}: {reason}, {int(sizes[over][0]):,} bytes ({FAIL_HINT})")
        records = [QuarantineRecord(file, None, reason, int(n)) for n in sizes[over]]
        batch = chunk.batch.filter(pa.array(~over))
        yield ReadChunk(batch, [*chunk.quarantined, *records])


def document_bytes(batch: pa.RecordBatch) -> np.ndarray:
    """UTF-8 bytes of each document's text, or of all its messages' contents."""
    if TEXT in batch.schema.names:
        return np.asarray(pc.binary_length(batch.column(TEXT)).fill_null(0), np.int64)
    from curate.chat.spec import MESSAGES

    if MESSAGES not in batch.schema.names or batch.num_rows == 0:
        return np.zeros(batch.num_rows, np.int64)
    messages = batch.column(MESSAGES)
    contents = pc.binary_length(pc.list_flatten(messages).field("content")).fill_null(0)
    per_message = np.concatenate([[0], np.cumsum(np.asarray(contents, np.int64))])
    offsets = np.asarray(messages.offsets, np.int64)
    offsets -= offsets[0]  # a sliced array's offsets start where the slice does
    return per_message[offsets[1:]] - per_message[offsets[:-1]]


def _check_unchanged(part: Partition) -> None:
    """The input is still the file discovered (its stat identity, curate.input_watch);
    the worker checks again once the partition has been read."""
    check(part.input)

"""Reading JSONL partitions (or .json arrays) of chat records into batches of `id`,
`messages` and kept fields.

Each line is parsed with `json.loads` (C) and mapped by `shapes.to_messages`; a line
that is not JSON, not an object, or not a possible conversation is quarantined with
its file, line, offset and reason. The lines come from `curate.io.lines`, as the text
reader's do (the same partitions, line numbers, offsets and bound on a line's length), so
derived ids (`file@offset` in a plain file, `file:line` in a compressed one) are the same
as the text reader's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from curate.chat.arrow_block import ArrowChatBlocks
from curate.chat.shapes import NO_CONVERSATION, NOT_A_LIST, Messages, to_messages
from curate.chat.spec import ChatInput, messages_type
from curate.errors import CurateError
from curate.io.batches import FieldSpec, ReadChunk, field_names
from curate.io.json_array import records
from curate.io.lines import JSONL_FORMATS, Block, LongLine, line_blocks, line_ids, split_lines
from curate.io.partitions import Partition
from curate.io.records import ErrorSink, FieldProblem, LineIds, type_name
from curate.reasons import (
    CONTENT_SURROGATE,
    DOCUMENT_TOO_LARGE,
    FIELD_CAST,
    ID_FIELD_MISSING_OR_TYPE,
    ID_FIELD_SURROGATE,
    INVALID_UTF8_LINE,
    NESTED_TOO_DEEPLY,
    NOT_A_JSON_OBJECT,
    json_problem,
)


def messages_array(conversations: list[Messages]) -> pa.Array:
    """A list<struct<role, content>> array built from flat columns, not per-message dicts."""
    lengths = np.fromiter(map(len, conversations), np.int32, len(conversations))
    offsets = np.zeros(len(conversations) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    roles = pa.array([r for conv in conversations for r, _ in conv], pa.string())
    contents = pa.array([c for conv in conversations for _, c in conv], pa.string())
    structs = pa.StructArray.from_arrays([roles, contents], ["role", "content"])
    return pa.ListArray.from_arrays(pa.array(offsets), structs, type=messages_type())


def read_chat_jsonl(
    part: Partition,
    fields: FieldSpec,
    chat: ChatInput,
    sink: ErrorSink,
    batch_bytes: int,
    max_line_bytes: int | None = None,
) -> Iterator[ReadChunk]:
    if part.input.format not in (*JSONL_FORMATS, "json"):
        raise CurateError(
            f"{part.input.name}: chat records are read from JSONL (.jsonl, .jsonl.gz, .jsonl.zst) "
            "or a .json array"
        )
    schema = chat.batch_schema(fields.keep_fields)
    ids = line_ids(part)
    rows: list[_Row] = []
    size = 0
    fast = ArrowChatBlocks(ids, fields, chat) if ArrowChatBlocks.eligible(
        fields, chat) else None  # fmt: skip
    pending: list[Line] = []  # lines for the fast path, from an empty batch on
    pending_size = 0

    def per_line(number: int, offset: int, raw: bytes) -> ReadChunk | None:
        nonlocal rows, size
        found = _record(raw, fields, chat)
        if isinstance(found, str):
            sink.bad(number, found, len(raw), offset=offset)
            return None
        if isinstance(found, FieldProblem):
            sink.bad(number, found.reason, len(raw), fields=found.fields, offset=offset)
            return None
        rows.append((number, offset, found[0], found[1], len(raw)))
        size += len(raw)
        if size < batch_bytes:
            return None
        batch, where = _batch(rows, ids, fields, schema, sink)
        chunk = ReadChunk(batch, sink.take(), *_located(where, part))
        rows, size = [], 0
        return chunk

    misses = 0  # blocks in a row Arrow could not take: after a few, this input is not its kind

    def block(lines: list[Line]) -> Iterator[ReadChunk]:
        """The lines as one Arrow batch, or line by line when Arrow cannot take them all:
        the same batches and quarantine either way (curate.chat.arrow_block)."""
        nonlocal fast, misses
        batch = fast.parse(lines, schema) if fast is not None else None
        if batch is not None:
            misses = 0
            where = [(number, offset) for number, offset, _ in lines]
            yield ReadChunk(batch, sink.take(), *_located(where, part))
            return
        misses += 1
        if misses >= _MISSES:  # (ShareGPT records under shape: auto, say)
            fast = None
        for number, offset, raw in lines:
            if (chunk := per_line(number, offset, raw)) is not None:
                yield chunk

    try:
        for number, offset, raw in _lines(part, sink, batch_bytes, max_line_bytes):
            if fast is None or rows:
                if (chunk := per_line(number, offset, raw)) is not None:
                    yield chunk
                continue
            pending.append((number, offset, raw))
            pending_size += len(raw)
            if pending_size >= batch_bytes:  # where the per-line path would end a batch
                yield from block(pending)
                pending, pending_size = [], 0
        if pending:
            yield from block(pending)
    except OSError as exc:
        raise CurateError(f"{part.input.name} cannot be read: {exc.strerror or exc}") from None
    batch, where = _batch(rows, ids, fields, schema, sink)
    quarantined = sink.take()
    if batch.num_rows or quarantined:
        yield ReadChunk(batch, quarantined, *_located(where, part))


def _record(
    raw: bytes, fields: FieldSpec, chat: ChatInput
) -> str | FieldProblem | tuple[dict[str, Any], Messages]:
    try:
        record = json.loads(raw)
    except UnicodeDecodeError as exc:
        return INVALID_UTF8_LINE(byte=exc.start)
    except json.JSONDecodeError as exc:
        return json_problem(exc.msg, exc.colno)
    except RecursionError:
        return NESTED_TOO_DEEPLY()
    if not isinstance(record, dict):
        return NOT_A_JSON_OBJECT()
    if fields.id_field is not None:
        value = record.get(fields.id_field)
        if not isinstance(value, str) and not (isinstance(value, int) and value is not True
                                               and value is not False):  # fmt: skip
            reason = ID_FIELD_MISSING_OR_TYPE(field=fields.id_field)
            return FieldProblem(reason, field_names(record))
    messages = to_messages(record, chat)
    if isinstance(messages, str):
        if messages == NO_CONVERSATION or messages.endswith(NOT_A_LIST):
            return FieldProblem(messages, field_names(record))
        return messages
    if _SURROGATE_ESCAPE.search(raw):  # json.loads keeps a lone \ud800: not text, not UTF-8
        if fields.id_field is not None and not _encodable(str(record[fields.id_field])):
            return ID_FIELD_SURROGATE(field=fields.id_field)
        problem = lone_surrogate(messages)
        if problem is not None:
            return problem
    return record, messages


def lone_surrogate(messages: Messages) -> str | None:
    """Why these messages cannot be text (a content holding a lone surrogate, which
    json.loads keeps from a `\\ud800` escape and UTF-8 cannot hold), or None."""
    for i, (_, content) in enumerate(messages):
        if not _encodable(content):
            return CONTENT_SURROGATE(i=i)
    return None


_MISSES = 4
Line = tuple[int, int, bytes]
"""A line's number (from 1 in its partition), where it starts, and its bytes."""
_Row = tuple[int, int, dict[str, Any], Messages, int]
"""A record read by the per-line path: its line's number and offset, the record, its
messages and its line's length."""
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _located(where: list[tuple[int, int]], part: Partition) -> tuple[np.ndarray, np.ndarray]:
    """Each row's line and where it starts, for the lineage (`curate.reading.located`), as
    the text readers give them: a JSONL line numbered from 1 at the partition's first line,
    a .json array's record numbered from 1."""
    first = 1 if part.input.format == "json" else 0
    lines = np.fromiter((n + first for n, _ in where), np.int64, count=len(where))
    return lines, np.fromiter((o for _, o in where), np.int64, count=len(where))


def _batch(
    rows: list[_Row], line_ids: LineIds, fields: FieldSpec, schema: pa.Schema, sink: ErrorSink
) -> tuple[pa.RecordBatch, list[tuple[int, int]]]:
    """The rows' batch, and the line and offset of each row it kept."""
    kept = list(rows)
    columns: dict[str, list[Any]] = {}
    for name, dtype in fields.keep_fields.items():
        good = []
        for row in kept:
            number, offset, record, _, nbytes = row
            try:
                pa.scalar(record.get(name), dtype)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
                reason = FIELD_CAST(field=name, type=type_name(dtype))
                sink.bad(number, reason, nbytes, offset=offset)
                continue
            good.append(row)
        kept = good
    for name in fields.keep_fields:
        columns[name] = [record.get(name) for _, _, record, _, _ in kept]
    if fields.id_field is None:
        ids = [line_ids.one(number, offset) for number, offset, _, _, _ in kept]
    else:
        ids = [str(record[fields.id_field]) for _, _, record, _, _ in kept]
    arrays = [pa.array(ids, pa.string()), messages_array([m for _, _, _, m, _ in kept])]
    arrays += [pa.array(columns[n], t) for n, t in fields.keep_fields.items()]
    where = [(number, offset) for number, offset, _, _, _ in kept]
    return pa.RecordBatch.from_arrays(arrays, schema=schema), where


def _lines(
    part: Partition, sink: ErrorSink, batch_bytes: int, max_line_bytes: int | None
) -> Iterator[Line]:
    """(line number from 1, where it starts, line with its newline) for the non-blank lines
    this partition owns; a line over max_line_bytes is set aside unread, as the text reader
    does. The records of a .json array are lines numbered from 0 (`curate.io.json_array`)."""
    if part.input.format == "json":
        for record in records(part, sink, batch_bytes, max_line_bytes):
            yield record.number, record.offset, record.data
        return
    number = 1
    for event in line_blocks(part, batch_bytes, max_line_bytes):
        if isinstance(event, Block):
            offset = event.offset
            for raw in split_lines(event.data):
                if raw.strip():
                    yield number, offset, raw
                number += 1
                offset += len(raw)
        elif isinstance(event, LongLine):
            reason = DOCUMENT_TOO_LARGE(limit=max_line_bytes)
            sink.bad(number, reason, event.nbytes, offset=event.offset)
            number += 1
        else:  # a cut or damaged stream: what it held of its last line is lost
            nbytes = event.partial_bytes or event.lost_bytes
            sink.bad(None, event.reason, nbytes, offset=event.offset)
            return

"""Reading `.json` files that hold one array of records: `[{"text": ...}, {"text": ...}]`.

The file streams through `json_array_scan.ArrayCutter` in chunks, so memory holds a chunk
and the records of one batch, never the file. Each record becomes one line for the JSONL
parsers (`BlockParser` for text records; the chat reader's lines for chat records), so its
fields, types, ids and reasons are the JSONL readers', and records set aside by the cutter
(too long, empty, cut short by the file's end) leave a blank line that keeps the numbering.

Records are numbered from 0 in the array: derived ids are `name:row`, as for columnar
inputs, and quarantine's `line` is the 1-based record number (`RecordSink`), with the
JSONL readers' "line" worded as "record". A file whose top-level value is not an array is
refused when inputs are checked, before a run writes anything. A file is one partition:
where a record begins cannot be found without reading every byte before it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import numpy as np

from curate.errors import CurateError
from curate.io.batches import FieldSpec, ReadChunk
from curate.io.json_array_scan import NotAnArray, Record, SetAside, cut
from curate.io.jsonl_block import BlockParser
from curate.io.partitions import Partition
from curate.io.records import ErrorSink, LineIds, empty_batch
from curate.reasons import (
    INVALID_UTF8_LINE,
    INVALID_UTF8_RECORD,
    NOT_A_JSON_OBJECT,
    NOT_A_JSON_OBJECT_RECORD,
)

_MIN_CHUNK = 1 << 20


class RecordSink(ErrorSink):
    """An ErrorSink for numbers counted from 0 (a record's row): quarantined by the 1-based
    record number, in the wording of records rather than lines, at the record's offset in
    the file (`offsets`, by number, for records the JSONL parser saw in a block of its own
    making)."""

    offsets: dict[int, int]

    @classmethod
    def like(cls, sink: ErrorSink) -> RecordSink:
        made = cls(sink.file, "fail" if sink.fail else "quarantine")
        made.offsets = {}
        return made

    def bad(
        self,
        line: int | None,
        reason: str,
        nbytes: int = 0,
        file: str | None = None,
        fields: tuple[str, ...] | None = None,
        offset: int | None = None,
    ) -> None:
        number = None if line is None else line + 1
        at = self.offsets.get(line, offset) if line is not None else offset
        super().bad(number, as_record(reason), nbytes, file, fields, at)

    def lines_since(self, mark: int) -> set[int | None]:
        """As the parser numbers them: from 0."""
        return {None if n is None else n - 1 for n in super().lines_since(mark)}


def as_record(reason: str) -> str:
    """A JSONL reader's reason about a line, worded for a record of an array."""
    if reason == NOT_A_JSON_OBJECT():
        return NOT_A_JSON_OBJECT_RECORD()
    if reason.startswith("line is a JSON "):  # NOT_AN_OBJECT
        return "record" + reason.removeprefix("line")
    if INVALID_UTF8_LINE.matches(reason):
        byte = int(reason.split()[4])
        return INVALID_UTF8_RECORD(byte=byte)
    return reason


def records(
    part: Partition, sink: ErrorSink, chunk_bytes: int, limit: int | None
) -> Iterator[Record]:
    """The array's records in order; the ones set aside go to the sink by number."""
    inp = part.input
    try:
        with open(inp.path, "rb") as f:
            chunks = iter(lambda: f.read(max(chunk_bytes, _MIN_CHUNK)), b"")
            for event in cut(chunks, sys.maxsize if limit is None else limit):
                if isinstance(event, SetAside):
                    sink.bad(event.number, event.reason, event.nbytes, offset=event.offset)
                else:
                    yield event
    except NotAnArray as exc:
        raise CurateError(f"{inp.label} holds {exc.what}") from None
    except OSError as exc:
        raise CurateError(f"{inp.label} cannot be read: {exc.strerror or exc}") from None


def read_json_array(
    part: Partition,
    fields: FieldSpec,
    sink: ErrorSink,
    batch_bytes: int,
    use_threads: bool,
    max_document_bytes: int | None = None,
) -> Iterator[ReadChunk]:
    """Text records: batches of about batch_bytes of records, parsed as JSONL lines are
    (ids `name:row`). `sink` must number by record (`RecordSink`)."""
    if not isinstance(sink, RecordSink):
        raise TypeError("a JSON array's records are quarantined through a RecordSink")
    parser = BlockParser(LineIds(part.input.name, by_offset=False), fields, sink, use_threads)
    lines: list[bytes] = []
    first = held = 0  # number of lines[0]; bytes in lines

    def block() -> ReadChunk:
        batch = parser.parse(b"\n".join(lines) + b"\n", first, 0)[0] if lines else None
        numbers, offsets = (parser.lines if batch is not None else None), None
        if numbers is not None:  # records numbered from 1, where they start in the file
            offsets = np.array([sink.offsets[n] for n in numbers.tolist()], np.int64)
            numbers = numbers + 1
        chunk = ReadChunk(batch if batch is not None else empty_batch(fields.schema()),
                          sink.take(), numbers, offsets)  # fmt: skip
        sink.offsets.clear()
        return chunk

    for record in records(part, sink, batch_bytes, max_document_bytes):
        if not lines:
            first = record.number
        lines += [b""] * (record.number - first - len(lines))  # set aside: a blank line
        lines.append(record.data)
        sink.offsets[record.number] = record.offset
        held += len(record.data)
        if held >= batch_bytes:
            yield block()
            lines, held = [], 0
    chunk = block()
    if chunk.batch.num_rows or chunk.quarantined:
        yield chunk

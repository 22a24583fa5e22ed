"""Reading .csv and .tsv files: one record per row, columns named by the header row.

The recipe's `text_field`, `id_field` and `fields` name header columns. Every column is
read as a string (a CSV cell has no type: `007` stays `007`, `NA` stays `NA`); a kept
field declared with another type is cast afterwards, row by row where a cell does not
fit (quarantined as `field_cast`), an empty cell becoming null. A missing text or id
column stops the run with a message naming the file and the columns it has, as for
Parquet.

Rows are numbered as records, the header not counted: ids derive from the 0-based row
(`name:row`, as for columnar inputs) and quarantine's `line` is the 1-based row. A row
with too many or too few cells is quarantined (`csv_columns`) and keeps its number, so
the rows after it keep their ids. Quoted values may hold newlines, so a row is not a
line and a file cannot be cut at a newline without reading it all: a CSV file is one
partition (`newlines_in_values` is always on). Parsing is pyarrow's streaming CSV reader
with a bounded block: a row longer than the block cannot be parsed, so the block grows
(the file read again from the start) up to `max_document_bytes` and 256 MiB at most; a
row longer still ends the file's reading, the rest quarantined as one record
(`csv_row_too_long`, 0 bytes: where the row began is not known), as the unreadable tail of
a truncated `.gz` is.
"""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from curate.errors import CurateError
from curate.io.batches import FieldSpec, ReadChunk
from curate.io.columnar import Converter
from curate.io.lines import BOM
from curate.io.partitions import Partition
from curate.io.rebatch import Rebatcher, slices_by_bytes
from curate.io.records import ErrorSink, empty_batch
from curate.reasons import CSV_COLUMNS, CSV_ROW_TOO_LONG

DELIMITERS = {"csv": ",", "tsv": "\t"}
_HEAD = 1 << 20  # the header row must end within the file's first MiB
_MIN_BLOCK = 1 << 20
_MAX_BLOCK = 256 << 20
_DEFAULT_LIMIT = 64 << 20


def read_delimited(
    part: Partition,
    fields: FieldSpec,
    sink: ErrorSink,
    batch_bytes: int,
    max_document_bytes: int | None = None,
) -> Iterator[ReadChunk]:
    """The file's rows as batches of about batch_bytes of text."""
    inp = part.input
    names = _header(inp.path, inp.format, inp.label)
    if names is None:  # an empty file (discovery warned): no rows
        return
    wanted = _wanted(names, fields, inp.name)
    convert = Converter(inp.name, fields, pa.schema([(n, pa.string()) for n in names]), sink)
    limit = max_document_bytes if max_document_bytes is not None else _DEFAULT_LIMIT
    cap = min(limit, _MAX_BLOCK) + _MIN_BLOCK
    block = min(max(batch_bytes, _MIN_BLOCK), cap)
    rows = _Rows()
    rebatcher = Rebatcher(fields.schema(), batch_bytes)
    while True:
        try:
            for raw, numbers in _batches(inp.path, inp.format, wanted, block, rows, sink):
                raw = _empty_cells_null(raw, fields)
                for start, stop in _runs(numbers):
                    run, at = raw.slice(start, stop - start), int(numbers[start])
                    for piece in slices_by_bytes(run, fields.text_field, batch_bytes):
                        batch = convert(piece, at)
                        at += piece.num_rows
                        yield from rebatcher.add(batch, sink.take())
            break
        except _RowTooLong:
            if block >= cap:  # bytes 0: the reader cannot say where the row began
                sink.bad(rows.next_number + 1, CSV_ROW_TOO_LONG(limit=cap))
                break
            block = cap  # read again with room for it; the rows given are skipped
        except (pa.ArrowException, OSError) as exc:
            raise CurateError(f"{inp.label} cannot be read as {inp.format}: {exc}") from None
    yield from rebatcher.add(empty_batch(fields.schema()), sink.take())
    yield from rebatcher.finish()


def _header(path: str, fmt: str, label: str) -> list[str] | None:
    """The header row's names, read with Python's csv module from the file's first MiB;
    None for an empty file."""
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD)
    except OSError as exc:
        raise CurateError(f"{label} cannot be read: {exc.strerror or exc}") from None
    head = head.removeprefix(BOM)
    if not head.strip():
        return None
    if len(head) >= _HEAD - len(BOM) and b"\n" not in head:
        raise CurateError(f"{label} has no header row ending within its first MiB")
    text = head.decode("utf-8", errors="surrogateescape")
    try:
        names = next(csv.reader(io.StringIO(text, newline=""), delimiter=DELIMITERS[fmt]))
    except csv.Error as exc:
        raise CurateError(f"{label}: its header row cannot be read ({exc})") from None
    for name in names:
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise CurateError(f"{label}: its header row is not UTF-8") from None
    return names


def _wanted(names: list[str], fields: FieldSpec, file: str) -> list[str]:
    """The header's columns the recipe reads, each once; the converter says what is missing."""
    wanted = [fields.text_field, fields.id_field, *fields.keep_fields]
    present = [n for n in dict.fromkeys(wanted) if n is not None and n in names]
    for name in present:
        if names.count(name) > 1:
            raise CurateError(
                f"{file}: column {name!r} appears {names.count(name)} times in its header"
            )
    return present


@dataclass
class _Rows:
    """Which rows have been given out, across readings of the file (a reading starts again
    from the file's start when a row did not fit its block)."""

    given: int = 0  # rows converted and given out
    bad: list[int] = field(default_factory=list)  # 0-based numbers of rows with wrong cells
    next_number: int = 0  # the number of the row after the last one accounted for


class _RowTooLong(Exception):
    """A row did not fit the reader's block."""


def _batches(
    path: str, fmt: str, wanted: list[str], block: int, rows: _Rows, sink: ErrorSink
) -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
    """One reading of the file: its batches of rows not given out before, each with its rows'
    0-based numbers; rows with the wrong number of cells go to the sink (once)."""
    seen_bad = len(rows.bad)
    reported: list[int] = []  # this reading's bad rows, in order

    def bad_row(row: pcsv.InvalidRow) -> str:
        number = (row.number or 0) - 2  # Arrow counts the header as row 1, from 1
        reported.append(number)
        if len(reported) > seen_bad:
            rows.bad.append(number)
            nbytes = len(row.text.encode("utf-8", errors="surrogatepass"))
            reason = CSV_COLUMNS(actual=row.actual_columns, expected=row.expected_columns)
            sink.bad(number + 1, reason, nbytes)
        return "skip"

    read_opts = pcsv.ReadOptions(use_threads=False, block_size=block)
    parse_opts = pcsv.ParseOptions(
        delimiter=DELIMITERS[fmt], newlines_in_values=True, invalid_row_handler=bad_row
    )
    convert_opts = pcsv.ConvertOptions(
        check_utf8=False,  # invalid UTF-8 is quarantined per row by the converter
        column_types={n: pa.string() for n in wanted},
        include_columns=wanted,
        strings_can_be_null=False,
        quoted_strings_can_be_null=False,
    )
    skip = rows.given
    cursor = 0  # number of the next row this reading gives
    used = 0  # bad rows of this reading placed among the numbers so far
    with pa.input_stream(path) as stream:
        try:
            reader = pcsv.open_csv(stream, read_opts, parse_opts, convert_opts)
            for raw in reader:
                numbers, cursor, used = _numbers(raw.num_rows, cursor, reported, used)
                if skip:  # rows an earlier reading gave
                    dropped = min(skip, raw.num_rows)
                    raw, numbers, skip = raw.slice(dropped), numbers[dropped:], skip - dropped
                if raw.num_rows:
                    rows.given += raw.num_rows
                    rows.next_number = int(numbers[-1]) + 1
                    yield raw, numbers
        except pa.ArrowInvalid as exc:
            if "straddling" not in str(exc):
                raise
            if reported:
                rows.next_number = max(rows.next_number, reported[-1] + 1)
            raise _RowTooLong from None
    if reported:
        rows.next_number = max(rows.next_number, reported[-1] + 1)


def _numbers(n: int, cursor: int, bad: list[int], used: int) -> tuple[np.ndarray, int, int]:
    """The numbers of the next n good rows from `cursor`, stepping over the bad rows'
    (bad[used:], in order); the cursor and `used` after them."""
    pieces = []
    while n:
        if used < len(bad) and bad[used] < cursor + n:
            gap = bad[used] - cursor
            pieces.append(np.arange(cursor, cursor + gap, dtype=np.int64))
            n -= gap
            cursor = bad[used] + 1
            used += 1
        else:
            pieces.append(np.arange(cursor, cursor + n, dtype=np.int64))
            cursor += n
            n = 0
    while used < len(bad) and bad[used] == cursor:  # bad rows right after: step over them
        cursor, used = cursor + 1, used + 1
    return (np.concatenate(pieces) if pieces else np.zeros(0, np.int64)), cursor, used


def _runs(numbers: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) index ranges of consecutive numbers."""
    if not len(numbers):
        return []
    cuts = np.flatnonzero(np.diff(numbers) != 1) + 1
    bounds = [0, *cuts.tolist(), len(numbers)]
    return list(itertools.pairwise(bounds))


def _empty_cells_null(raw: pa.RecordBatch, fields: FieldSpec) -> pa.RecordBatch:
    """An empty cell of a kept field typed other than string is null, not a value to cast."""
    arrays, changed = [], False
    for name, col in zip(raw.schema.names, raw.columns, strict=True):
        dtype = fields.keep_fields.get(name)
        if dtype is not None and not pa.types.is_string(dtype) and name != fields.text_field:
            empty = pc.equal(pc.binary_length(col), 0)
            if empty.true_count:
                col = pc.if_else(empty, pa.nulls(len(col), col.type), col)
                changed = True
        arrays.append(col)
    return pa.RecordBatch.from_arrays(arrays, schema=raw.schema) if changed else raw

"""Parsing one block of complete JSONL lines into a record batch.

The fast path hands the whole block to Arrow's JSON reader with an explicit
schema for just the fields the recipe uses. It is trusted only when nothing can
have gone wrong: the block is valid UTF-8 (Arrow does not check), every
non-blank line starts with `{`, Arrow read it without error, it produced one
row per non-blank line, and the arrays it built are valid.

When a block fails, the failure usually says which line is bad (Arrow's error
names the row; the UTF-8 check gives the offset; a null text is a known row).
That line goes to `LineJudge`, the lines before it are read fast again, and
reading resumes after it, so a block with a few bad lines costs a few Arrow
calls, not a Python loop over every line. A failure that names no line sends
the rest of the block to the judge. Whether the fast path takes a line depends
on that line alone, and the judge accepts exactly what the fast path would, so a
record's fate never depends on which other lines share its block.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from curate.errors import CurateError
from curate.io.batches import FieldSpec
from curate.io.jsonl_judge import LineJudge
from curate.io.jsonl_scan import Lines, invalid_utf8_at, scan
from curate.io.lines import BOM
from curate.io.records import ErrorSink, LineIds, empty_batch, type_name

_ROW = re.compile(r" in row (\d+)$")
_MAX_HOPS = 16  # bad lines located per block before the rest is judged line by line


class BlockParser:
    """Parses blocks of one JSONL input for one FieldSpec."""

    def __init__(self, ids: LineIds, fields: FieldSpec, sink: ErrorSink, use_threads: bool) -> None:
        self.ids, self.fields, self.sink = ids, fields, sink
        self.use_threads = use_threads
        self.schema = fields.schema()
        self.judge = LineJudge(ids, fields, sink)
        text, id_field, keep = fields.text_field, fields.id_field, fields.keep_fields
        if text in keep and keep[text] != pa.string():
            raise CurateError(
                f"text field {text!r} is also kept as {type_name(keep[text])}; text is a string"
            )
        fixed = {**keep, text: pa.string()}
        # An id is a string or an integer; each block tries the kind that worked last first.
        self._id_types: list[pa.DataType | None] = [None]
        if id_field in fixed:
            t = fixed[id_field]
            if not (pa.types.is_string(t) or pa.types.is_integer(t)):
                raise CurateError(
                    f"id field {id_field!r} is also kept as {type_name(t)}; "
                    "ids must be strings or integers"
                )
        elif id_field is not None:
            self._id_types = [pa.string(), pa.int64()]
        self._fixed = fixed
        self.lines: Any = None  # the last parsed block's rows: their line numbers, then
        self.offsets: Any = None  # where they start (None: not known)

    def parse(self, block: bytes, first_line: int, offset: int) -> tuple[pa.RecordBatch, int]:
        """The documents of `block` (whole lines, the first numbered first_line, starting at
        `offset` in the input), and its lines."""
        lines = scan(block, first_line, offset)
        mark = self.sink.noted()
        pieces: list[pa.RecordBatch] = []
        start = lines.first
        part = lines
        for _ in range(_MAX_HOPS):
            result = self._settle(part, self._attempt(part))
            if isinstance(result, pa.RecordBatch):
                pieces.append(result)
                start = lines.end
                break
            if result is None:
                break
            bad = result  # a line known to be bad: read the lines before it fast, judge it
            if bad > start:
                head = lines.span(start, bad)
                fast = self._settle(head, self._attempt(head))
                pieces.append(fast if isinstance(fast, pa.RecordBatch) else self._judge(head))
            pieces.append(self.judge.judge([lines.raw(bad)], bad, lines.where(bad)))
            start = bad + 1
            if start >= lines.end:
                break
            part = lines.span(start, lines.end)
        if start < lines.end:
            pieces.append(self._judge(lines.span(start, lines.end)))
        batch = _concat(pieces, self.schema)
        self._locate(lines, self.sink.lines_since(mark), batch.num_rows)
        return batch, lines.count

    def _locate(self, lines: Lines, bad: set[int | None], rows: int) -> None:
        """Each row's line and where it starts: the block's non-blank lines that were not set
        aside, in order (every other non-blank line became a row, in line order)."""
        numbers = lines.numbers
        if bad:
            numbers = [n for n in numbers if n not in bad]
        if len(numbers) != rows:  # not the lines it should be: said unknown, never wrong
            self.lines = self.offsets = None
            return
        self.lines = np.asarray(numbers, np.int64)
        self.offsets = lines.starts(numbers) if rows else np.empty(0, np.int64)

    def _settle(
        self, lines: Lines, result: pa.RecordBatch | _Partial | int | None
    ) -> pa.RecordBatch | int | None:
        """A partial result becomes its good rows, once the judge has said why the rest is bad."""
        if not isinstance(result, _Partial):
            return result
        for number in result.bad:
            judged = self.judge.judge([lines.raw(number)], number, lines.where(number))
            assert judged.num_rows == 0, "a line Arrow read without text or id was accepted"
        return result.batch

    def _judge(self, lines: Lines) -> pa.RecordBatch:
        return self.judge.judge(lines.split(), lines.first, lines.base)

    def _attempt(self, lines: Lines) -> pa.RecordBatch | _Partial | int | None:
        """The block's batch; or its good rows and the lines with no text or id; or the number
        of a line known to be bad; or None when it failed without saying where."""
        numbers, block = lines.numbers, lines.block
        if not numbers:
            return empty_batch(self.schema)
        if lines.odd is not None:
            return lines.odd
        if block.startswith(BOM):
            return numbers[0]  # a BOM here is mid-file (Arrow would skip it): the judge rejects it
        bad_byte = invalid_utf8_at(block)
        if bad_byte is not None:
            return lines.first + block.count(b"\n", 0, bad_byte)
        table, row = self._read(block)
        if table is None:
            return numbers[row] if row is not None and row < len(numbers) else None
        if table.num_rows != len(numbers):
            return None  # a line holding two values, or a bare CR Arrow splits on
        fields = self.fields
        text = table.column(fields.text_field).combine_chunks()
        if fields.id_field is None:
            ids = self.ids.array(numbers, lambda: lines.starts(numbers))
        else:
            ids = table.column(fields.id_field).combine_chunks().cast(pa.string())
        arrays = [ids, text] + [table.column(f).combine_chunks() for f in fields.keep_fields]
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        try:  # cheap (GB/s), and guards against Arrow's reader building invalid arrays
            batch.validate(full=True)
        except pa.ArrowInvalid:
            return None
        missing = pc.or_(text.is_null(), ids.is_null())
        if missing.true_count:
            rows = pc.indices_nonzero(missing).to_pylist()
            return _Partial(batch.filter(pc.invert(missing)), [numbers[r] for r in rows])
        return batch

    def _read(self, block: bytes) -> tuple[pa.Table | None, int | None]:
        """Arrow's table for the block, or None and the row its error names."""
        row = None
        for i, id_type in enumerate(self._id_types):
            schema = dict(self._fixed)
            if id_type is not None:
                schema[self.fields.id_field] = id_type  # type: ignore[index]
            table, error = self._arrow(block, pa.schema(list(schema.items())))
            if table is not None:
                if i:  # remember which kind of id this input has
                    self._id_types.insert(0, self._id_types.pop(i))
                return table, None
            found = _ROW.search(error)
            if found:  # with mixed id kinds, the row the parse got furthest to
                row = max(row or 0, int(found.group(1)))
        return None, row

    def _arrow(self, data: bytes, schema: pa.Schema) -> tuple[pa.Table | None, str]:
        # Without threads the block is one Arrow block. With threads it is cut into a few
        # per core, which fails if a line is longer than a piece: then it is read whole, so
        # a row named in the last error counts from the start of the block.
        sizes = [max(len(data), 1 << 16)]
        if self.use_threads and len(data) > 4 << 20:
            sizes.insert(0, max(len(data) // (2 * pa.cpu_count()), 1 << 20))
        parse = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
        error = ""
        for size in sizes:
            opts = pj.ReadOptions(use_threads=self.use_threads, block_size=size)
            try:
                return pj.read_json(io.BytesIO(data), read_options=opts, parse_options=parse), ""
            except pa.ArrowException as exc:
                error = str(exc)
        return None, error


@dataclass
class _Partial:
    batch: pa.RecordBatch
    bad: list[int]


def _concat(pieces: list[pa.RecordBatch], schema: pa.Schema) -> pa.RecordBatch:
    batches = [b for b in pieces if b.num_rows]
    if not batches:
        return empty_batch(schema)
    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches, schema).combine_chunks().to_batches()[0]

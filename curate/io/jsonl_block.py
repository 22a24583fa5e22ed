"""Parsing one block of complete JSONL lines into a record batch.

The fast path hands the whole block to Arrow's JSON reader with an explicit
schema for just the fields the recipe uses. It is trusted only when nothing can
have gone wrong: the block is valid UTF-8 (Arrow does not check), Arrow read it
without error, it produced one row per non-blank line and no null text or id.
Otherwise the block is read again line by line with `json.loads`, which finds
each bad line and its number; the lines that pass are handed back to Arrow for
the kept fields, so a value is converted by the same code whichever path read
it. A record's fate therefore never depends on which other lines share its block.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.json as pj

from curate.errors import CurateError
from curate.io.batches import FieldSpec
from curate.io.records import ErrorSink, derived_ids, empty_batch, kind, split_good, type_name

_BOM = b"\xef\xbb\xbf"
_WS = b" \t\r"
_MISSING = object()


class BlockParser:
    """Parses blocks of one JSONL input for one FieldSpec."""

    def __init__(self, name: str, fields: FieldSpec, sink: ErrorSink, use_threads: bool) -> None:
        self.name, self.fields, self.sink = name, fields, sink
        self.use_threads = use_threads
        self.schema = fields.schema()
        text, id_field, keep = fields.text_field, fields.id_field, fields.keep_fields
        if text in keep and keep[text] != pa.string():
            raise CurateError(
                f"text field {text!r} is also kept as {type_name(keep[text])}; text is a string"
            )
        fixed = {**keep, text: pa.string()}
        # An id is a string or an integer; each block tries the kind that worked last first.
        self._id_types: list[pa.DataType] = []
        if id_field in fixed:
            t = fixed[id_field]
            if not (pa.types.is_string(t) or pa.types.is_integer(t)):
                raise CurateError(
                    f"id field {id_field!r} is also kept as {type_name(t)}; "
                    "ids must be strings or integers"
                )
            self._id_types = [t]
        elif id_field is not None:
            self._id_types = [pa.string(), pa.int64()]
        self._fixed = fixed
        self._keep_schema = pa.schema(list(keep.items()))

    def parse(self, block: bytes, first_line: int) -> tuple[pa.RecordBatch, int]:
        """The documents of `block` (whole lines, the first numbered first_line), and its lines."""
        count, numbers, objects = _nonblank_lines(block, first_line)
        batch = self._fast(block, numbers) if objects else None
        return batch or self._slow(block, first_line), count

    # -- fast path ---------------------------------------------------------------------------

    def _fast(self, block: bytes, numbers: Sequence[int]) -> pa.RecordBatch | None:
        if not numbers:
            return empty_batch(self.schema)
        if block.startswith(_BOM) or not (block.isascii() or _valid_utf8(block)):
            return None  # a BOM here is mid-file (Arrow would skip it); let json.loads judge
        table = self._read_fast(block)
        if table is None or table.num_rows != len(numbers):
            return None
        fields = self.fields
        text = table.column(fields.text_field).combine_chunks()
        if text.null_count:
            return None
        if fields.id_field is None:
            ids = derived_ids(self.name, ":", pa.array(numbers, pa.int64()))
        else:
            ids = table.column(fields.id_field).combine_chunks()
            if ids.null_count:
                return None
            ids = ids.cast(pa.string())
        arrays = [ids, text] + [table.column(f).combine_chunks() for f in fields.keep_fields]
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        try:  # cheap (GB/s), and guards against Arrow's reader building invalid arrays
            batch.validate(full=True)
        except pa.ArrowInvalid:
            return None
        return batch

    def _read_fast(self, block: bytes) -> pa.Table | None:
        for i, id_type in enumerate(self._id_types or [None]):
            schema = dict(self._fixed)
            if id_type is not None:
                schema[self.fields.id_field] = id_type  # type: ignore[index]
            table = self._arrow(block, pa.schema(list(schema.items())))
            if table is not None:
                if i:  # remember which kind of id this input has
                    self._id_types.insert(0, self._id_types.pop(i))
                return table
        return None

    def _arrow(self, data: bytes, schema: pa.Schema) -> pa.Table | None:
        # Without threads the block is one Arrow block. With threads it is cut into
        # a few per core, which fails if a line is longer than a piece: then whole.
        sizes = [max(len(data), 1 << 16)]
        if self.use_threads and len(data) > 4 << 20:
            sizes.insert(0, max(len(data) // (2 * pa.cpu_count()), 1 << 20))
        parse = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
        for size in sizes:
            opts = pj.ReadOptions(use_threads=self.use_threads, block_size=size)
            try:
                return pj.read_json(io.BytesIO(data), read_options=opts, parse_options=parse)
            except pa.ArrowException:
                continue
        return None

    # -- slow path ---------------------------------------------------------------------------

    def _slow(self, block: bytes, first_line: int) -> pa.RecordBatch:
        fields, sink = self.fields, self.sink
        raws: list[bytes] = []
        numbers: list[int] = []
        ids: list[str] = []
        texts: list[str] = []
        lines = block.split(b"\n")
        if block.endswith(b"\n"):
            lines.pop()
        for i, raw in enumerate(lines):
            if not raw.strip(_WS):
                continue
            number = first_line + i
            try:
                record = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                sink.bad(number, f"invalid UTF-8 at byte {exc.start} of the line", len(raw))
                continue
            except json.JSONDecodeError as exc:
                reason = f"malformed JSON at column {exc.colno}: {exc.msg}"
                sink.bad(number, reason, len(raw))
                continue
            except RecursionError:
                sink.bad(number, "malformed JSON: nested too deeply", len(raw))
                continue
            result = self._check(record)
            if isinstance(result, str):
                sink.bad(number, result, len(raw))
                continue
            doc_id, text = result
            raws.append(raw)
            numbers.append(number)
            ids.append(doc_id if doc_id is not None else f"{self.name}:{number}")
            texts.append(text)
        good, failing = split_good(len(raws), lambda lo, hi: self._reparse(raws[lo:hi]))
        for j in failing:
            sink.bad(numbers[j], self._arrow_reason(raws[j]), len(raws[j]))
        if not good:
            return empty_batch(self.schema)
        keep = pa.concat_tables([table for _, _, table in good])
        rows = [j for lo, hi, _ in good for j in range(lo, hi)]
        arrays = [
            pa.array([ids[j] for j in rows], pa.string()),
            pa.array([texts[j] for j in rows], pa.string()),
        ]
        arrays += [keep.column(f).combine_chunks() for f in fields.keep_fields]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _check(self, record: object) -> str | tuple[str | None, str]:
        """A reason the record is bad, or its (id, text)."""
        if not isinstance(record, dict):
            return f"line is a JSON {kind(record)}, not an object"
        text_field, id_field = self.fields.text_field, self.fields.id_field
        text = record.get(text_field, _MISSING)
        if text is _MISSING:
            return f"missing text field {text_field!r}"
        if not isinstance(text, str):
            return f"text field {text_field!r} is {kind(text)}, not a string"
        doc_id = None
        if id_field is not None:
            value = record.get(id_field, _MISSING)
            if value is _MISSING:
                return f"missing id field {id_field!r}"
            if isinstance(value, str):
                doc_id = value
            elif isinstance(value, int) and not isinstance(value, bool):
                doc_id = str(value)
            else:
                return f"id field {id_field!r} is {kind(value)}, not a string or integer"
        for field, dtype in self.fields.keep_fields.items():
            value = record.get(field)
            if value is not None and not _fits(value, dtype):
                return f"field {field!r} is {kind(value)}, not {type_name(dtype)}"
        return doc_id, text

    def _reparse(self, raws: list[bytes]) -> pa.Table | None:
        table = self._arrow(b"\n".join(raws) + b"\n", self._keep_schema)
        return table if table is not None and table.num_rows == len(raws) else None

    def _arrow_reason(self, raw: bytes) -> str:
        """Why Arrow rejects a line json.loads accepted, without quoting any of its content."""
        opts = pj.ReadOptions(use_threads=False, block_size=max(len(raw), 1 << 16))
        try:
            table = pj.read_json(io.BytesIO(raw), read_options=opts)
        except pa.ArrowException as exc:
            message = re.sub(r" in row \d+$", "", str(exc)).removeprefix("JSON parse error: ")
            return f"JSON the Arrow reader rejects: {message.split(':')[0]}"
        if table.num_rows != 1:
            return f"the Arrow reader reads the line as {table.num_rows} records (a bare CR?)"
        for field, dtype in self.fields.keep_fields.items():
            if self._arrow(raw, pa.schema([(field, dtype)])) is None:
                return f"field {field!r} cannot be read as {type_name(dtype)}"
        return "the Arrow reader rejects the line"


def _fits(value: object, dtype: pa.DataType) -> bool:
    """Whether Arrow's JSON reader can convert a value of this JSON kind to dtype (a pre-check)."""
    if pa.types.is_string(dtype):
        return isinstance(value, str)
    if pa.types.is_boolean(dtype):
        return isinstance(value, bool)
    if pa.types.is_integer(dtype):
        return isinstance(value, int) and not isinstance(value, bool)
    if pa.types.is_floating(dtype):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if pa.types.is_list(dtype):
        return isinstance(value, list)
    return True  # other types: Arrow decides


def _nonblank_lines(block: bytes, first_line: int) -> tuple[int, Sequence[int], bool]:
    """Lines in `block`, the numbers of those that are not blank, and whether all of those
    start with `{` (else the block goes to the slow path: Arrow's reader crashes on a block
    whose first value is a top-level `null`, apache/arrow#47409).

    The common case, every line starting with `{`, is settled by one vectorised pass;
    only blocks with other lines are split in Python.
    """
    import numpy as np

    data = np.frombuffer(block, np.uint8)
    newlines = np.flatnonzero(data == 10)
    count = len(newlines) + (0 if block.endswith(b"\n") or not block else 1)
    starts = data[newlines[newlines + 1 < len(data)] + 1]
    if block[:1] == b"{" and bool((starts == 123).all()):
        return count, range(first_line, first_line + count), True
    lines = block.split(b"\n")
    if block.endswith(b"\n"):
        lines.pop()
    stripped = [(first_line + i, line.lstrip(_WS)) for i, line in enumerate(lines)]
    numbers = [n for n, line in stripped if line.rstrip(_WS)]
    objects = all(line.startswith(b"{") for _, line in stripped if line.rstrip(_WS))
    return count, numbers, objects


def _valid_utf8(data: bytes) -> bool:
    """Arrow's UTF-8 check over the whole block, zero-copy, several GB/s."""
    offsets = pa.array([0, len(data)], pa.int64()).buffers()[1]
    arr = pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, pa.py_buffer(data)])
    try:
        arr.cast(pa.large_string())
        return True
    except pa.ArrowInvalid:
        return False

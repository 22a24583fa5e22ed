"""Judging JSONL lines one at a time, for the few lines the fast path could not take.

Each line is decoded and parsed with `json.loads`, which says what is wrong and
where, without quoting the content (it may hold personal data). The lines it
accepts are then read by Arrow's JSON reader for the kept fields, so a value is
converted by the same code as on the fast path; a line Arrow rejects is
quarantined too, so the two paths accept exactly the same lines.
"""

from __future__ import annotations

import io
import json
import re

import pyarrow as pa
import pyarrow.json as pj

from curate.io.batches import FieldSpec, field_names
from curate.io.jsonl_scan import WS
from curate.io.records import (
    ErrorSink,
    FieldProblem,
    LineIds,
    empty_batch,
    kind,
    split_good,
    type_name,
)
from curate.reasons import (
    ARROW_OTHER,
    ARROW_ROWS,
    FIELD_CAST,
    FIELD_TYPE,
    ID_FIELD_TYPE,
    INVALID_UTF8_LINE,
    MISSING_ID_FIELD,
    MISSING_TEXT_FIELD,
    NESTED_TOO_DEEPLY,
    NOT_AN_OBJECT,
    TEXT_FIELD_TYPE,
    arrow_problem,
    json_problem,
)

_MISSING = object()


class LineJudge:
    """Reads lines one by one for one input and FieldSpec, reporting the bad ones to a sink."""

    def __init__(self, ids: LineIds, fields: FieldSpec, sink: ErrorSink) -> None:
        self.ids, self.fields, self.sink = ids, fields, sink
        self.schema = fields.schema()
        self._keep_schema = pa.schema(list(fields.keep_fields.items()))

    def judge(self, lines: list[bytes], first_line: int, offset: int) -> pa.RecordBatch:
        """Consecutive lines (without their newlines), the first numbered first_line and
        starting at `offset` in the input."""
        raws: list[bytes] = []
        numbers: list[int] = []
        offsets: list[int] = []
        ids: list[str] = []
        texts: list[str] = []
        next_at = offset
        for i, raw in enumerate(lines):
            at, next_at = next_at, next_at + len(raw) + 1
            if not raw.strip(WS):
                continue
            number = first_line + i
            result = self._check(raw)
            if isinstance(result, str):
                self.sink.bad(number, result, len(raw), offset=at)
                continue
            if isinstance(result, FieldProblem):
                self.sink.bad(number, result.reason, len(raw), fields=result.fields, offset=at)
                continue
            doc_id, text = result
            raws.append(raw)
            numbers.append(number)
            offsets.append(at)
            ids.append(doc_id if doc_id is not None else self.ids.one(number, at))
            texts.append(text)
        good, failing = split_good(len(raws), lambda lo, hi: self._reparse(raws[lo:hi]))
        for j in failing:
            reason = self._arrow_reason(raws[j])
            fields = field_names(json.loads(raws[j])) if reason.startswith("field ") else None
            self.sink.bad(numbers[j], reason, len(raws[j]), fields=fields, offset=offsets[j])
        if not good:
            return empty_batch(self.schema)
        keep = pa.concat_tables([table for _, _, table in good])
        rows = [j for lo, hi, _ in good for j in range(lo, hi)]
        arrays = [
            pa.array([ids[j] for j in rows], pa.string()),
            pa.array([texts[j] for j in rows], pa.string()),
        ]
        arrays += [keep.column(f).combine_chunks() for f in self.fields.keep_fields]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _check(self, raw: bytes) -> str | FieldProblem | tuple[str | None, str]:
        """A reason the line is bad (with the record's field names when a field is missing
        or of the wrong type), or its (id, text)."""
        try:
            record = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            return INVALID_UTF8_LINE(byte=exc.start)
        except json.JSONDecodeError as exc:
            return json_problem(exc.msg, exc.colno)
        except RecursionError:
            return NESTED_TOO_DEEPLY()
        if not isinstance(record, dict):
            return NOT_AN_OBJECT(kind=kind(record))
        reason = self._field_problem(record)
        if reason is not None:
            return FieldProblem(reason, field_names(record))
        id_field = self.fields.id_field
        value = record.get(id_field) if id_field is not None else None
        return (None if value is None else str(value)), record[self.fields.text_field]

    def _field_problem(self, record: dict[str, object]) -> str | None:
        text_field, id_field = self.fields.text_field, self.fields.id_field
        text = record.get(text_field, _MISSING)
        if text is _MISSING:
            return MISSING_TEXT_FIELD(field=text_field)
        if not isinstance(text, str):
            return TEXT_FIELD_TYPE(field=text_field, kind=kind(text))
        if id_field is not None:
            value = record.get(id_field, _MISSING)
            if value is _MISSING:
                return MISSING_ID_FIELD(field=id_field)
            if not (isinstance(value, str) or _is_int(value)):
                return ID_FIELD_TYPE(field=id_field, kind=kind(value))
        for field, dtype in self.fields.keep_fields.items():
            value = record.get(field)
            if value is not None and not _fits(value, dtype):
                return FIELD_TYPE(field=field, kind=kind(value), type=type_name(dtype))
        return None

    def _reparse(self, raws: list[bytes]) -> pa.Table | None:
        table = arrow_json(b"\n".join(raws) + b"\n", self._keep_schema)
        return table if table is not None and table.num_rows == len(raws) else None

    def _arrow_reason(self, raw: bytes) -> str:
        """Why Arrow rejects a line json.loads accepted, without quoting any of its content
        (nor its keys, which Arrow's messages name)."""
        opts = pj.ReadOptions(use_threads=False, block_size=max(len(raw), 1 << 16))
        try:
            table = pj.read_json(io.BytesIO(raw), read_options=opts)
        except pa.ArrowException as exc:
            message = re.sub(r" in row \d+$", "", str(exc)).removeprefix("JSON parse error: ")
            return arrow_problem(message)
        if table.num_rows != 1:
            return ARROW_ROWS(n=table.num_rows)
        for field, dtype in self.fields.keep_fields.items():
            if arrow_json(raw, pa.schema([(field, dtype)])) is None:
                return FIELD_CAST(field=field, type=type_name(dtype))
        return ARROW_OTHER()


def arrow_json(data: bytes, schema: pa.Schema) -> pa.Table | None:
    """Small data through Arrow's JSON reader in one block, or None if it fails."""
    opts = pj.ReadOptions(use_threads=False, block_size=max(len(data), 1 << 16))
    parse = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    try:
        return pj.read_json(io.BytesIO(data), read_options=opts, parse_options=parse)
    except pa.ArrowException:
        return None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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

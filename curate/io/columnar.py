"""Reading Parquet files, Arrow IPC files and streams, and `save_to_disk` folders.

These formats carry types, so a text column of the wrong type, or a missing
text or id column, is a schema problem: the run stops with a message naming the
file and column instead of quarantining every row. Row-level problems (a null
text, a value that does not fit the type the recipe asked for, invalid UTF-8)
are quarantined with `line` = the 1-based row number within the input, the same
numbering as JSONL lines; derived ids use the 0-based row (`name:row`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from curate.errors import CurateError
from curate.io import folders
from curate.io.batches import FieldSpec, ReadChunk
from curate.io.rebatch import Rebatcher, slices_by_bytes
from curate.io.records import ErrorSink, derived_ids, split_good, type_name
from curate.reasons import (
    FIELD_CAST,
    FIELD_UTF8,
    ID_FIELD_NULL,
    ID_FIELD_UTF8,
    TEXT_FIELD_NULL,
    TEXT_FIELD_UTF8,
)

if TYPE_CHECKING:
    import pyarrow.parquet as pq

    from curate.io.inputs import InputFile
    from curate.io.partitions import Partition

log = logging.getLogger(__name__)

Unit = tuple[int, int]  # (bytes, rows) of one row group, record batch or shard


def read_columnar(
    part: Partition, fields: FieldSpec, sink: ErrorSink, batch_bytes: int, use_threads: bool
) -> Iterator[ReadChunk]:
    """Batches of the partition's row groups / record batches / shards, about batch_bytes each."""
    rebatcher = Rebatcher(fields.schema(), batch_bytes)
    row = part.first_row
    seen: pa.Schema | None = None
    for schema, raw in _raw_batches(part, fields, batch_bytes, use_threads):
        if seen is None or not schema.equals(seen):
            convert, seen = Converter(part.input.name, fields, schema, sink), schema
        for piece in slices_by_bytes(raw, fields.text_field, batch_bytes):
            batch = convert(piece, row)
            row += piece.num_rows
            yield from rebatcher.add(batch, sink.take())
    yield from rebatcher.finish()


def units(inp: InputFile) -> list[Unit]:
    """The pieces a partition is made of, with their sizes and row counts, in input order."""
    try:
        if inp.format == "parquet":
            with _parquet(inp.path) as pf:
                md = pf.metadata
            return [
                (md.row_group(i).total_byte_size, md.row_group(i).num_rows)
                for i in range(md.num_row_groups)
            ]
        if inp.format == "arrow":
            return [(b.nbytes, b.num_rows) for b in ipc_batches(inp.path)]
        members = folders.members_of(inp.path, inp.format, inp.size, inp.mtime_ns, inp.name)
        return [
            (m.size, sum(b.num_rows for b in ipc_batches(os.path.join(inp.path, m.rel))))
            for m in members[:-1]  # the last member is state.json
        ]
    except (pa.ArrowException, OSError) as exc:
        raise CurateError(f"{inp.label} cannot be read as {inp.format}: {exc}") from None


def _raw_batches(
    part: Partition, fields: FieldSpec, batch_bytes: int, use_threads: bool
) -> Iterator[tuple[pa.Schema, pa.RecordBatch]]:
    inp = part.input
    wanted = [fields.text_field, fields.id_field, *fields.keep_fields]
    try:
        if inp.format == "parquet":
            with _parquet(inp.path) as pf:
                schema, md = pf.schema_arrow, pf.metadata
                groups = list(range(part.start, part.stop))
                nbytes = sum(md.row_group(i).total_byte_size for i in groups)
                nrows = sum(md.row_group(i).num_rows for i in groups)
                batch_rows = max(1, batch_bytes * nrows // max(1, nbytes))
                columns = [c for c in schema.names if c in wanted]
                for raw in pf.iter_batches(
                    batch_size=batch_rows,
                    row_groups=groups,
                    columns=columns,
                    use_threads=use_threads,
                ):
                    yield schema, raw
        elif inp.format == "arrow":
            for raw in ipc_batches(inp.path, part.start, part.stop):
                yield raw.schema, raw
        else:
            members = folders.members_of(inp.path, inp.format, inp.size, inp.mtime_ns, inp.name)
            for m in members[part.start : part.stop]:
                path = os.path.join(inp.path, m.rel)
                st = os.stat(path)
                if (st.st_size, st.st_mtime_ns) != (m.size, m.mtime_ns):
                    raise CurateError(
                        f"shard {m.rel!r} of {inp.label} changed while curate was running"
                    )
                for raw in ipc_batches(path):
                    yield raw.schema, raw
    except (pa.ArrowException, OSError) as exc:
        raise CurateError(f"{inp.label} cannot be read as {inp.format}: {exc}") from None


def _parquet(path: str) -> pq.ParquetFile:
    import pyarrow.parquet as pq

    return pq.ParquetFile(path, memory_map=True)


def ipc_batches(path: str, start: int = 0, stop: int | None = None) -> Iterator[pa.RecordBatch]:
    """Record batches start..stop-1 of an Arrow IPC file or stream, memory-mapped (no copy)."""
    with pa.memory_map(path) as source:
        if source.read(6) == b"ARROW1":
            source.seek(0)
            reader = pa.ipc.open_file(source)
            n = reader.num_record_batches
            for i in range(start, n if stop is None else min(stop, n)):
                yield reader.get_batch(i)
        else:
            source.seek(0)
            for i, batch in enumerate(pa.ipc.open_stream(source)):
                if stop is not None and i >= stop:
                    break
                if i >= start:
                    yield batch


def _string_like(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


class Converter:
    """Checks one source schema against the recipe, then converts its batches."""

    def __init__(self, name: str, fields: FieldSpec, schema: pa.Schema, sink: ErrorSink) -> None:
        self.name, self.fields, self.sink = name, fields, sink
        self.names = tuple(sorted(n[:64] for n in schema.names[:20]))  # for a field's problems
        text, id_field = fields.text_field, fields.id_field
        self._require(schema, text, "text_field")
        if not _string_like(schema.field(text).type):
            raise CurateError(
                f"{name}: column {text!r} is {schema.field(text).type}, not a string column"
            )
        if id_field is not None:
            self._require(schema, id_field, "id_field")
            t = schema.field(id_field).type
            if not (_string_like(t) or pa.types.is_integer(t)):
                raise CurateError(
                    f"{name}: id column {id_field!r} is {t}; ids must be strings or integers"
                )
        self.present = {}
        for field, dtype in fields.keep_fields.items():
            if field not in schema.names:
                log.warning("%s has no column %r; it will be null", name, field)
                continue
            src = schema.field(field).type
            try:
                pa.array([], src).cast(dtype)
            except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
                raise CurateError(
                    f"{name}: column {field!r} is {src}, which cannot be read as {type_name(dtype)}"
                ) from None
            self.present[field] = dtype

    def _require(self, schema: pa.Schema, column: str, role: str) -> None:
        if column not in schema.names:
            shown = ", ".join(schema.names[:20]) + (", ..." if len(schema.names) > 20 else "")
            raise CurateError(
                f"{self.name}: no column {column!r} (the recipe's {role}); it has: {shown}"
            )

    def __call__(self, raw: pa.RecordBatch, first_row: int) -> pa.RecordBatch:
        fields, n = self.fields, raw.num_rows
        bad: dict[int, str] = {}
        text = pc.cast(raw.column(fields.text_field), pa.string())
        self._nulls(text, TEXT_FIELD_NULL(field=fields.text_field), bad)
        self._invalid_utf8(text, TEXT_FIELD_UTF8(field=fields.text_field), bad)
        ids = None
        if fields.id_field is not None:
            ids = pc.cast(raw.column(fields.id_field), pa.string())
            self._nulls(ids, ID_FIELD_NULL(field=fields.id_field), bad)
            self._invalid_utf8(ids, ID_FIELD_UTF8(field=fields.id_field), bad)
        kept: dict[str, pa.Array] = {}
        for field, dtype in self.present.items():
            col = raw.column(field)
            try:
                kept[field] = pc.cast(col, dtype)
            except pa.ArrowInvalid:
                reason = FIELD_CAST(field=field, type=type_name(dtype))
                _, failing = split_good(n, partial(_cast_ok, col, dtype))
                for i in failing:
                    bad.setdefault(i, reason)
                kept[field] = pc.cast(_null_at(col, failing), dtype)
            if pa.types.is_string(dtype) or pa.types.is_list(dtype):
                self._invalid_utf8(kept[field], FIELD_UTF8(field=field), bad)
        if ids is None:
            ids = derived_ids(self.name, ":", range(first_row, first_row + n))
        arrays = [ids, text]
        for field, dtype in fields.keep_fields.items():
            arrays.append(kept[field] if field in kept else pa.nulls(n, dtype))
        batch = pa.RecordBatch.from_arrays(arrays, schema=fields.schema())
        if not bad:
            return batch
        for i in sorted(bad):
            field_problem = "UTF-8" not in bad[i]  # null, or not of the kept type
            self.sink.bad(first_row + i + 1, bad[i], fields=self.names if field_problem else None)
        keep_mask = pa.array([i not in bad for i in range(n)], pa.bool_())
        return batch.filter(keep_mask)

    def _nulls(self, arr: pa.Array, reason: str, bad: dict[int, str]) -> None:
        if arr.null_count:
            for i in pc.indices_nonzero(arr.is_null()).to_pylist():
                bad.setdefault(i, reason)

    def _invalid_utf8(self, arr: pa.Array, reason: str, bad: dict[int, str]) -> None:
        try:
            arr.validate(full=True)
            return
        except pa.ArrowInvalid:
            pass
        _, failing = split_good(len(arr), partial(_valid, arr))
        for i in failing:
            bad.setdefault(i, reason)


def _cast_ok(col: pa.Array, dtype: pa.DataType, lo: int, hi: int) -> bool | None:
    try:
        col.slice(lo, hi - lo).cast(dtype)
        return True
    except pa.ArrowInvalid:
        return None


def _valid(arr: pa.Array, lo: int, hi: int) -> bool | None:
    try:
        arr.slice(lo, hi - lo).validate(full=True)
        return True
    except pa.ArrowInvalid:
        return None


def _null_at(col: pa.Array, rows: list[int]) -> pa.Array:
    """`col` with the given rows set to null, so the rest can be cast."""
    mask = [False] * len(col)
    for i in rows:
        mask[i] = True
    return pc.if_else(pa.array(mask, pa.bool_()), pa.nulls(len(col), col.type), col)

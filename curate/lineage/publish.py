"""Writing a version's lineage side table at publish, from what its partitions staged.

Each partition's shard writer staged, in the order it wrote them, the id, line and
offset of every document (`curate.output.lineage_rows`). Shards are merged and tails
packed at publish, so where a document ended up is read back from the final shards
themselves: their `id` column, or a packed row's `doc_ids` with `doc_starts` (a token
window: the first row holding the document's first token, `doc_offsets` 0) or
`cu_seqlens` (whole conversations). The two are joined on the id (and, should ids repeat,
on which occurrence of it: both sides list documents in the same order), and written in
output order. Only the shards' id columns are touched (memory-mapped), never their tokens.

When both sides list the same ids in the same order (shards of a row per document, no
split: the shards hold each partition's documents in the order it staged them), the join
is that order itself: the rows are paired as they are read, a shard and a staged file at a
time, and written in batches, so publish holds one batch and the ids' hashes (8 bytes a
document) rather than the whole table and a hash join over it (2.2 GB for 5 million
documents, the driver's peak of a 10^8-line line_dedup run: `benchmarks/line_dedup_memory`).
Any other case (packed rows, splits, a missing document) takes the join; both write the
same bytes.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from curate.digests import sha256_file
from curate.errors import CurateError
from curate.lineage.table import (
    BATCH_ROWS,
    DOCUMENTS,
    DOCUMENTS_SCHEMA,
    FOLDER,
    IDS,
    id_hashes,
    ids_schema,
)
from curate.manifest import FileRecord
from curate.output.lineage_rows import STAGED_SCHEMA
from curate.output.shards import read_stream

log = logging.getLogger(__name__)


Parts = Sequence[tuple[str, list[dict[str, object]], int]]


def staged_sources(parts: Parts, inputs: dict[str, int], resolve: object) -> pa.Table:
    """Every partition's staged rows in partition order, with the index of its input.

    `parts`: (input name, the record's lineage files, lines of the file before the
    partition's first line: a plain JSONL partition's reader numbers from 1 there);
    `resolve` maps a staged path to the file in the staging folder (None: it leaves it)."""
    return _sources_table(staged_tables(parts, inputs, resolve))


def _sources_table(tables: Iterable[pa.Table]) -> pa.Table:
    tables = list(tables)
    if not tables:
        empty = STAGED_SCHEMA.empty_table()
        return empty.append_column("input", pa.array([], pa.int32()))
    return pa.concat_tables(tables)


def staged_tables(parts: Parts, inputs: dict[str, int], resolve: object) -> Iterator[pa.Table]:
    """`staged_sources`, one staged file at a time."""
    for name, files, shift in parts:
        for info in files:
            path = resolve(info["path"])  # type: ignore[operator]
            if path is None:
                raise CurateError(f"a record names {info['path']!r}, outside the staging folder")
            if info.get("sha256") and sha256_file(path) != info["sha256"]:
                raise CurateError(f"{path}: changed since it was written (sha256 differs)")
            table = read_stream(path).cast(STAGED_SCHEMA)
            if shift:
                at = table.schema.get_field_index("line")
                table = table.set_column(at, "line", pc.add(table.column("line"), shift))
            index = pa.array(np.full(table.num_rows, inputs[name], np.int32))
            yield table.append_column("input", index)


POSITIONS_SCHEMA = pa.schema(
    [
        pa.field("shard", pa.int32()),
        pa.field("row", pa.int64()),
        pa.field("start", pa.int32()),
        pa.field("id", pa.string()),
    ]
)


def shard_positions(out: Path, shards: Sequence[FileRecord]) -> pa.Table:
    """(shard, row, start, id) of each document's first appearance, in output order."""
    pieces = list(position_tables(out, shards))
    if not pieces:
        return POSITIONS_SCHEMA.empty_table()
    return pa.concat_tables(pieces)


def position_tables(out: Path, shards: Sequence[FileRecord]) -> Iterator[pa.Table]:
    """`shard_positions`, one shard at a time."""
    for i, record in enumerate(shards):
        table = read_stream(out / record.path)
        names = table.schema.names
        if "doc_ids" in names:
            yield _packed(i, table)
        else:
            n = table.num_rows
            yield pa.table(
                {
                    "shard": pa.array(np.full(n, i, np.int32)),
                    "row": pa.array(np.arange(n, dtype=np.int64)),
                    "start": pa.nulls(n, pa.int32()),
                    "id": table.column("id").combine_chunks().cast(pa.string()),
                }
            )


def _packed(shard: int, table: pa.Table) -> pa.Table:
    doc_ids = table.column("doc_ids").combine_chunks()
    counts = np.diff(np.asarray(doc_ids.offsets, np.int64)).astype(np.int64)
    rows = np.repeat(np.arange(table.num_rows, dtype=np.int64), counts)
    ids = pc.list_flatten(doc_ids).cast(pa.string())
    if "doc_starts" in table.schema.names:  # a window of the token stream: first pieces only
        starts = np.asarray(pc.list_flatten(table.column("doc_starts").combine_chunks()), np.int32)
        before = np.asarray(pc.list_flatten(table.column("doc_offsets").combine_chunks()))
        first = before == 0
    else:  # whole conversations: each starts where cu_seqlens says (its last: the row's end)
        cu = table.column("cu_seqlens").combine_chunks()
        values = np.asarray(pc.list_flatten(cu), np.int32)
        ends = np.asarray(cu.offsets, np.int64)[1:] - 1
        keep = np.ones(len(values), bool)
        keep[ends[ends >= 0]] = False
        starts = values[keep]
        first = np.ones(len(starts), bool)
    return pa.table(
        {
            "shard": pa.array(np.full(int(first.sum()), shard, np.int32)),
            "row": pa.array(rows[first]),
            "start": pa.array(starts[first], pa.int32()),
            "id": ids.filter(pa.array(first)),
        }
    )


def lineage_table(sources: pa.Table, positions: pa.Table) -> pa.Table:
    """Each written document's place in the output joined to its place in the input."""
    occurrence = pl.int_range(pl.len()).over("id").alias("k")
    left = pl.from_arrow(positions).with_row_index("at").with_columns(occurrence)  # type: ignore[union-attr]
    right = pl.from_arrow(sources).with_columns(occurrence)  # type: ignore[union-attr]
    joined = left.join(right, on=["id", "k"], how="left").sort("at")
    missing = joined.filter(pl.col("input").is_null()).height
    if missing:
        log.warning("lineage: %d documents in the shards have no staged source", missing)
    return joined.select(DOCUMENTS_SCHEMA.names).to_arrow().cast(DOCUMENTS_SCHEMA)


def write_lineage(
    out: Path,
    sources: Callable[[], Iterable[pa.Table]],
    shards: Sequence[FileRecord],
    *,
    fsync: bool = True,
    file_mode: int = 0o640,
) -> list[FileRecord]:
    """The version's `lineage/` files, written into `out` (the version-to-be), from the
    staged rows `sources()` gives (`staged_tables`: called again if the rows must be
    joined, see the module's docstring)."""
    (out / FOLDER).mkdir(exist_ok=True)
    rows = _write_paired(out, sources(), position_tables(out, shards), fsync, file_mode)
    if rows is not None:
        return _write_index(out, *rows, fsync, file_mode)
    table = lineage_table(_sources_table(sources()), shard_positions(out, shards))
    return write_lineage_table(out, table, fsync=fsync, file_mode=file_mode)


def write_lineage_table(
    out: Path, table: pa.Table, *, fsync: bool = True, file_mode: int = 0o640
) -> list[FileRecord]:
    """`documents.arrow` from the table (`DOCUMENTS_SCHEMA`, in output order) and its id
    index (also `gc --purge-forgotten`'s, rewriting a version: `curate.forget.rewrite`)."""
    documents = _write_file(out / DOCUMENTS, table, "zstd", fsync, file_mode)
    return _write_index(out, documents, id_hashes(table.column("id")), fsync, file_mode)


def _write_index(
    out: Path, documents: int, hashes: np.ndarray, fsync: bool, file_mode: int
) -> list[FileRecord]:
    """`ids.arrow` from the hashes of documents.arrow's ids (written: `documents` rows)."""
    order = np.argsort(hashes, kind="stable")
    schema = ids_schema(len(order))
    positions = order.astype(schema.field("position").type.to_pandas_dtype())
    ids = pa.table({"hash": pa.array(hashes[order]), "position": pa.array(positions)},
                   schema=schema)  # fmt: skip
    index = _write_file(out / IDS, ids, None, fsync, file_mode, batch_rows=None)
    return [_record(out, DOCUMENTS, documents), _record(out, IDS, index)]


def _write_paired(
    out: Path,
    sources: Iterable[pa.Table],
    positions: Iterable[pa.Table],
    fsync: bool,
    file_mode: int,
) -> tuple[int, np.ndarray] | None:
    """documents.arrow written as the shards' rows and the staged rows are read, when the
    two list the same ids in the same order; its rows and the ids' hashes. None when they
    do not (or there is no document): the file is removed, and the join must write it."""
    path = out / DOCUMENTS
    options = pa.ipc.IpcWriteOptions(compression="zstd", use_threads=False)
    with contextlib.suppress(FileNotFoundError):  # an interrupted publish's: never written through
        os.unlink(path)
    staged = _Rows(sources)
    hashes: list[np.ndarray] = []
    paired = True
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, file_mode)
    with os.fdopen(fd, "wb") as f:
        with pa.ipc.new_file(f, DOCUMENTS_SCHEMA, options=options) as writer:
            pending: list[pa.Table] = []
            held = 0
            for place in positions:
                if not place.num_rows:
                    continue
                rows = _paired(place, staged.take(place.num_rows))
                if rows is None:
                    paired = False
                    break
                pending.append(rows)
                held += rows.num_rows
                if held >= BATCH_ROWS:  # whole batches, as `_write_file` cuts the table
                    table = pa.concat_tables(pending).combine_chunks()
                    whole = held - held % BATCH_ROWS
                    writer.write_table(table.slice(0, whole), max_chunksize=BATCH_ROWS)
                    hashes.append(id_hashes(table.column("id").slice(0, whole)))
                    pending, held = [table.slice(whole)], held - whole
            paired = paired and staged.exhausted()
            if paired and held:
                table = _clean_padding(pa.concat_tables(pending).combine_chunks())
                writer.write_table(table, max_chunksize=BATCH_ROWS)
                hashes.append(id_hashes(table.column("id")))
        f.flush()
        if fsync and paired and hashes:
            os.fsync(f.fileno())
    if not paired or not hashes:
        os.unlink(path)
        return None
    return sum(len(h) for h in hashes), np.concatenate(hashes)


def _paired(place: pa.Table, staged: pa.Table | None) -> pa.Table | None:
    """A shard's positions beside the staged rows of the same documents (None: not those)."""
    if staged is None:
        return None
    ids, same = place.column("id"), staged.column("id")
    if ids.null_count or same.null_count or not pc.all(pc.equal(ids, same)).as_py():
        return None
    columns = [place.column(n) for n in ("shard", "row", "start", "id")]
    columns += [staged.column(n) for n in ("input", "line", "offset", "changed", "pii")]
    return pa.table(columns, schema=DOCUMENTS_SCHEMA)


class _Rows:
    """The rows of a sequence of tables, taken a number at a time across their bounds."""

    def __init__(self, tables: Iterable[pa.Table]) -> None:
        self.tables: Iterator[pa.Table] = iter(tables)
        self.held: pa.Table | None = None
        self.at = 0

    def _next(self) -> bool:
        while self.held is None or self.at == self.held.num_rows:
            self.held, self.at = next(self.tables, None), 0
            if self.held is None:
                return False
        return True

    def take(self, n: int) -> pa.Table | None:
        """The next n rows (None: fewer are left)."""
        parts = []
        while n:
            if not self._next():
                return None
            assert self.held is not None
            k = min(n, self.held.num_rows - self.at)
            parts.append(self.held.slice(self.at, k))
            self.at, n = self.at + k, n - k
        return pa.concat_tables(parts)

    def exhausted(self) -> bool:
        return not self._next()


def _write_file(
    path: Path,
    table: pa.Table,
    compression: str | None,
    fsync: bool,
    file_mode: int,
    batch_rows: int | None = BATCH_ROWS,
) -> int:
    """An Arrow IPC file (random access by batch), written whole; its row count."""
    options = pa.ipc.IpcWriteOptions(compression=compression, use_threads=False)
    with contextlib.suppress(FileNotFoundError):  # an interrupted publish's: never written through
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, file_mode)
    with os.fdopen(fd, "wb") as f:
        with pa.ipc.new_file(f, table.schema, options=options) as writer:
            whole = _clean_padding(table.combine_chunks())
            writer.write_table(whole, max_chunksize=batch_rows or max(table.num_rows, 1))
        f.flush()
        if fsync:
            os.fsync(f.fileno())
    return table.num_rows


def _clean_padding(table: pa.Table) -> pa.Table:
    """The table (one chunk a column) with the bits after its last row cleared in every
    validity bitmap. The IPC writer copies a bitmap's last byte whole, bits past the end
    included, and what a join leaves there (polars sets them) would make a file's bytes
    depend on how its rows were put together: the join and the rows paired as read write
    the same bytes only so."""
    n = table.num_rows
    if n % 8 == 0:
        return table
    columns = []
    for column in table.columns:
        array = column.chunk(0)
        if array.null_count and array.buffers()[0] is not None:
            valid = array.is_valid().to_numpy(zero_copy_only=False)
            bits = np.packbits(np.concatenate([np.zeros(array.offset, bool), valid]),
                               bitorder="little")  # fmt: skip
            buffers = [pa.py_buffer(bits.tobytes()), *array.buffers()[1:]]
            array = pa.Array.from_buffers(
                array.type, n, buffers, array.null_count, offset=array.offset
            )
        columns.append(array)
    return pa.Table.from_arrays(columns, schema=table.schema)


def _record(out: Path, rel: str, rows: int) -> FileRecord:
    path = out / rel
    return FileRecord(path=rel, rows=rows, bytes=path.stat().st_size, sha256=sha256_file(path))

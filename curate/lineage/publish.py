"""Writing a version's lineage side table at publish, from what its partitions staged.

Each partition's shard writer staged, in the order it wrote them, the id, line and
offset of every document (`curate.output.lineage_rows`). Shards are merged and tails
packed at publish, so where a document ended up is read back from the final shards
themselves: their `id` column, or a packed row's `doc_ids` with `doc_starts` (a token
window: the first row holding the document's first token, `doc_offsets` 0) or
`cu_seqlens` (whole conversations). The two are joined on the id (and, should ids repeat,
on which occurrence of it: both sides list documents in the same order), and written in
output order. Only the shards' id columns are touched (memory-mapped), never their tokens.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Sequence
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


def staged_sources(
    parts: Sequence[tuple[str, list[dict[str, object]], int]],
    inputs: dict[str, int],
    resolve: object,
) -> pa.Table:
    """Every partition's staged rows in partition order, with the index of its input.

    `parts`: (input name, the record's lineage files, lines of the file before the
    partition's first line: a plain JSONL partition's reader numbers from 1 there);
    `resolve` maps a staged path to the file in the staging folder (None: it leaves it)."""
    tables = []
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
            tables.append(table.append_column("input", index))
    if not tables:
        empty = STAGED_SCHEMA.empty_table()
        return empty.append_column("input", pa.array([], pa.int32()))
    return pa.concat_tables(tables)


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
    pieces = []
    for i, record in enumerate(shards):
        table = read_stream(out / record.path)
        names = table.schema.names
        if "doc_ids" in names:
            pieces.append(_packed(i, table))
        else:
            n = table.num_rows
            pieces.append(
                pa.table(
                    {
                        "shard": pa.array(np.full(n, i, np.int32)),
                        "row": pa.array(np.arange(n, dtype=np.int64)),
                        "start": pa.nulls(n, pa.int32()),
                        "id": table.column("id").combine_chunks().cast(pa.string()),
                    }
                )
            )
    if not pieces:
        return POSITIONS_SCHEMA.empty_table()
    return pa.concat_tables(pieces)


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
    sources: pa.Table,
    shards: Sequence[FileRecord],
    *,
    fsync: bool = True,
    file_mode: int = 0o640,
) -> list[FileRecord]:
    """The version's `lineage/` files, written into `out` (the version-to-be)."""
    table = lineage_table(sources, shard_positions(out, shards))
    (out / FOLDER).mkdir(exist_ok=True)
    return write_lineage_table(out, table, fsync=fsync, file_mode=file_mode)


def write_lineage_table(
    out: Path, table: pa.Table, *, fsync: bool = True, file_mode: int = 0o640
) -> list[FileRecord]:
    """`documents.arrow` from the table (`DOCUMENTS_SCHEMA`, in output order) and its id
    index (also `gc --purge-forgotten`'s, rewriting a version: `curate.forget.rewrite`)."""
    documents = _write_file(out / DOCUMENTS, table, "zstd", fsync, file_mode)
    hashes = id_hashes(table.column("id"))
    order = np.argsort(hashes, kind="stable")
    schema = ids_schema(len(order))
    positions = order.astype(schema.field("position").type.to_pandas_dtype())
    ids = pa.table({"hash": pa.array(hashes[order]), "position": pa.array(positions)},
                   schema=schema)  # fmt: skip
    index = _write_file(out / IDS, ids, None, fsync, file_mode, batch_rows=None)
    return [_record(out, DOCUMENTS, documents), _record(out, IDS, index)]


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
            if batch_rows is None:
                writer.write_table(table.combine_chunks(), max_chunksize=max(table.num_rows, 1))
            else:
                writer.write_table(table.combine_chunks(), max_chunksize=batch_rows)
        f.flush()
        if fsync:
            os.fsync(f.fileno())
    return table.num_rows


def _record(out: Path, rel: str, rows: int) -> FileRecord:
    path = out / rel
    return FileRecord(path=rel, rows=rows, bytes=path.stat().st_size, sha256=sha256_file(path))

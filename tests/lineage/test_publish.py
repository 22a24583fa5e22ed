"""Publishing the lineage side table (curate.lineage.publish): the rows paired as they are
read write the same bytes as the join, which still serves every case they do not fit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from curate.lineage import publish
from curate.lineage.table import BATCH_ROWS, DOCUMENTS, IDS
from curate.manifest import FileRecord
from curate.output.lineage_rows import STAGED_SCHEMA

DOCS = 2 * BATCH_ROWS + 18_005  # three batches, the last partial (and not whole bytes of bits)
SHARDS = (70_001, 0, 50_000, DOCS - 120_001)  # an empty shard among them
FIRST_STAGED = 40_000  # the staged files cut elsewhere than the shards


def staged(ids: list[str]) -> list[pa.Table]:
    """Staged rows of these documents, as two partitions' files (with their input)."""
    n = len(ids)
    table = pa.table(
        {
            "id": ids,
            "line": np.arange(1, n + 1, dtype=np.int64),
            "offset": pa.nulls(n, pa.int64()),
            "changed": np.arange(n, dtype=np.uint64) % 3,
            "pii": pa.array([f"EMAIL 0-{i % 7}" if i % 5 == 0 else None for i in range(n)]),
        },
        schema=STAGED_SCHEMA,
    )
    tables, at = [], 0
    for k, rows in enumerate((FIRST_STAGED, n - FIRST_STAGED)):
        part = table.slice(at, rows)
        tables.append(part.append_column("input", pa.array(np.full(rows, k, np.int32))))
        at += rows
    return tables


def shards(out: Path, ids: list[str]) -> list[FileRecord]:
    """Row-per-document shards holding these ids, in this order."""
    (out / "shards").mkdir(parents=True)
    records, at = [], 0
    for k, rows in enumerate(SHARDS):
        path = f"shards/part-{k:05d}.arrow"
        table = pa.table({"id": ids[at : at + rows], "text": ["x"] * rows})
        with pa.ipc.new_stream(str(out / path), table.schema) as writer:
            writer.write_table(table)
        records.append(FileRecord(path=path, rows=rows, bytes=0, sha256=""))
        at += rows
    return records


def joined(out: Path, sources: list[pa.Table], records: list[FileRecord]) -> dict[str, bytes]:
    """The files the join writes (in a folder of their own)."""
    folder = out / "joined"
    (folder / "lineage").mkdir(parents=True)
    positions = publish.shard_positions(out, records)
    table = publish.lineage_table(pa.concat_tables(sources), positions)
    publish.write_lineage_table(folder, table, fsync=False)
    return {name: (folder / name).read_bytes() for name in (DOCUMENTS, IDS)}


def test_rows_in_the_same_order_are_paired_without_the_join(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = [f"d{i}" for i in range(DOCS)]
    sources, records = staged(ids), shards(tmp_path, ids)
    expected = joined(tmp_path, sources, records)

    def no_join(*_: object) -> pa.Table:
        raise AssertionError("joined rows that were in order")

    monkeypatch.setattr(publish, "lineage_table", no_join)
    written = publish.write_lineage(tmp_path, lambda: iter(sources), records, fsync=False)
    assert [(r.path, r.rows) for r in written] == [(DOCUMENTS, DOCS), (IDS, DOCS)]
    for name, data in expected.items():
        assert (tmp_path / name).read_bytes() == data, name


@pytest.mark.parametrize("change", ["swapped", "missing", "extra"])
def test_rows_out_of_order_are_joined(tmp_path: Path, change: str) -> None:
    ids = [f"d{i}" for i in range(DOCS)]
    in_shards = list(ids)
    if change == "swapped":  # two documents of one shard written the other way round
        in_shards[100_000], in_shards[100_001] = in_shards[100_001], in_shards[100_000]
    elif change == "missing":  # a staged document no shard holds (the join warns)
        ids.insert(DOCS // 2, "gone")
    else:  # a document in the shards beyond the staged ones
        in_shards[-1] = "unstaged"
    sources, records = staged(ids), shards(tmp_path, in_shards)
    expected = joined(tmp_path, sources, records)
    written = publish.write_lineage(tmp_path, lambda: iter(sources), records, fsync=False)
    assert written[0].rows == len(in_shards)
    for name, data in expected.items():
        assert (tmp_path / name).read_bytes() == data, name


def test_bits_past_the_last_row_do_not_reach_the_file(tmp_path: Path) -> None:
    """What a join leaves past the end of a bitmap (polars sets those bits) is not written."""
    offsets, empty = pa.py_buffer(np.zeros(4, np.int32).tobytes()), pa.py_buffer(b"")
    files = []
    for last in (b"\xf8", b"\x00"):  # three nulls, then bits set or clear
        pii = pa.Array.from_buffers(pa.string(), 3, [pa.py_buffer(last), offsets, empty], 3)
        table = pa.table({"id": ["a", "b", "c"], "pii": pii})
        path = tmp_path / f"{last.hex()}.arrow"
        publish._write_file(path, table, "zstd", False, 0o640)
        files.append(path.read_bytes())
    assert files[0] == files[1]

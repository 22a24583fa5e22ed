"""What a partition's digest covers (curate.io.partition_digest): the stage cache keys pass 0
by it, so two partitions with one digest must read as the same rows. A Parquet column
renamed, or an Arrow dictionary's values changed, leave every column chunk or index buffer
as it was; the digest must still change."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from curate.io.inputs import discover_inputs
from curate.io.partition_digest import partition_digest
from curate.io.partitions import plan_partitions


def digests(path: Path) -> list[str]:
    files = discover_inputs([str(path)], path.parent, check=False)
    return [partition_digest(p) for p in plan_partitions(files, 1 << 20)]


def test_a_renamed_parquet_column_changes_the_digest(tmp_path: Path) -> None:
    table = pa.table({"id": ["a", "b"], "text": ["one two", "three four"]})
    pq.write_table(table, tmp_path / "x.parquet")
    before = digests(tmp_path / "x.parquet")
    pq.write_table(table.rename_columns(["id", "body"]), tmp_path / "x.parquet")
    assert digests(tmp_path / "x.parquet") != before
    pq.write_table(table, tmp_path / "x.parquet")
    assert digests(tmp_path / "x.parquet") == before


def test_a_changed_arrow_dictionary_changes_the_digest(tmp_path: Path) -> None:
    def write(values: list[str]) -> None:
        text = pa.DictionaryArray.from_arrays(pa.array([0, 1, 0], pa.int32()), pa.array(values))
        table = pa.table({"id": ["a", "b", "c"], "text": text})
        with pa.ipc.new_file(str(tmp_path / "x.arrow"), table.schema) as writer:
            writer.write_table(table)

    write(["one two", "three four"])
    before = digests(tmp_path / "x.arrow")
    write(["one six", "three four"])  # same indices, same lengths: another text
    assert digests(tmp_path / "x.arrow") != before

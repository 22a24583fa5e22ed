"""Reading Parquet, Arrow IPC (file and stream) and save_to_disk folders."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curate.errors import CurateError
from curate.io.batches import FieldSpec, QuarantineRecord
from curate.io.inputs import discover_inputs
from curate.io.partitions import plan_partitions
from curate.reading import read_partition


@pytest.fixture(autouse=True)
def _from_the_recipe_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Messages show paths from the current folder: here, where the inputs are listed from."""
    monkeypatch.chdir(tmp_path)


KEEP = {"score": pa.float64(), "n": pa.int64(), "lang": pa.string()}


def table(n: int = 100) -> pa.Table:
    return pa.table(
        {
            "doc": pa.array([f"d{i}" for i in range(n)]),
            "body": pa.array([f"text {i} " * (1 + i % 30) for i in range(n)], pa.large_string()),
            "score": pa.array([i / 2 for i in range(n)], pa.float32()),
            "n": pa.array(range(n), pa.int32()),
            "extra": pa.array([{"k": i} for i in range(n)]),
        }
    )


def write(tmp_path: Path, name: str, t: pa.Table, chunk: int = 10) -> None:
    path = tmp_path / name
    if name.endswith(".parquet"):
        pq.write_table(t, path, row_group_size=chunk)
    elif name.endswith(".arrow"):
        with pa.ipc.new_file(path, t.schema) as w:
            for b in t.to_batches(max_chunksize=chunk):
                w.write_batch(b)
    else:
        with pa.ipc.new_stream(path, t.schema) as w:
            for b in t.to_batches(max_chunksize=chunk):
                w.write_batch(b)


def read(
    tmp_path: Path, name: str, fields: FieldSpec, target: int = 10**9, **kw: object
) -> tuple[list[dict], list[QuarantineRecord], list[pa.RecordBatch]]:
    parts = plan_partitions(discover_inputs([name], tmp_path), target)
    rows: list[dict] = []
    bad: list[QuarantineRecord] = []
    batches = []
    for part in parts:
        for chunk in read_partition(part, fields, **kw):  # type: ignore[arg-type]
            assert chunk.batch.schema == fields.schema()
            batches.append(chunk.batch)
            rows += chunk.batch.to_pylist()
            bad += chunk.quarantined
    return rows, bad, batches


FORMATS = ["a.parquet", "a.arrow", "a.feather"]


@pytest.mark.parametrize("name", FORMATS)
def test_fields_are_cast_to_the_recipe_types(tmp_path: Path, name: str) -> None:
    write(tmp_path, name, table())
    rows, bad, _ = read(tmp_path, name, FieldSpec("body", "doc", KEEP))
    assert bad == []
    assert rows[3] == {"id": "d3", "text": "text 3 " * 4, "score": 1.5, "n": 3, "lang": None}
    assert len(rows) == 100


@pytest.mark.parametrize("name", FORMATS)
def test_derived_ids_are_rows_within_the_input_across_partitions(tmp_path: Path, name: str) -> None:
    write(tmp_path, name, table(), chunk=7)
    rows, _, _ = read(tmp_path, name, FieldSpec("body"), target=2000)
    assert [r["id"] for r in rows] == [f"{name}:{i}" for i in range(100)]


def test_integer_id_column_is_stringified(tmp_path: Path) -> None:
    t = table().set_column(0, "doc", pa.array(range(100, 200), pa.int64()))
    write(tmp_path, "a.parquet", t)
    rows, _, _ = read(tmp_path, "a.parquet", FieldSpec("body", "doc"))
    assert rows[0]["id"] == "100"


@pytest.mark.parametrize("name", FORMATS)
def test_null_text_and_null_id_are_quarantined_by_row(tmp_path: Path, name: str) -> None:
    t = table(30)
    body = t.column("body").to_pylist()
    doc = t.column("doc").to_pylist()
    body[4] = None
    doc[17] = None
    t = t.set_column(1, "body", pa.array(body, pa.string())).set_column(0, "doc", pa.array(doc))
    write(tmp_path, name, t)
    rows, bad, _ = read(tmp_path, name, FieldSpec("body", "doc"))
    assert len(rows) == 28
    assert [(q.file, q.line, q.reason) for q in bad] == [
        (name, 5, "text field 'body' is null"),
        (name, 18, "id field 'doc' is null"),
    ]
    with pytest.raises(CurateError, match=re.escape(f"{name}:5: text field 'body' is null")):
        read(tmp_path, name, FieldSpec("body", "doc"), on_error="fail")


def test_values_that_do_not_fit_the_declared_type_are_quarantined(tmp_path: Path) -> None:
    t = pa.table({"text": ["a", "b", "c", "d"], "n": ["1", "two", "3", "4.5"]})
    write(tmp_path, "a.parquet", t)
    rows, bad, _ = read(tmp_path, "a.parquet", FieldSpec(keep_fields={"n": pa.int64()}))
    assert [(r["text"], r["n"]) for r in rows] == [("a", 1), ("c", 3)]
    assert [(q.line, q.reason) for q in bad] == [
        (2, "field 'n' cannot be read as int64"),
        (4, "field 'n' cannot be read as int64"),
    ]


def test_missing_kept_column_is_null(tmp_path: Path) -> None:
    write(tmp_path, "a.parquet", table(5))
    rows, _, _ = read(tmp_path, "a.parquet", FieldSpec("body", keep_fields={"lang": pa.string()}))
    assert [r["lang"] for r in rows] == [None] * 5


@pytest.mark.parametrize("name", FORMATS)
def test_schema_problems_stop_the_run_naming_file_and_column(tmp_path: Path, name: str) -> None:
    write(tmp_path, name, table(5))
    with pytest.raises(CurateError, match=re.escape(f"{name}: column 'n' is int32, not a string")):
        read(tmp_path, name, FieldSpec("n"))
    with pytest.raises(
        CurateError, match=re.escape(f"{name}: no column 'text' (the recipe's text")
    ):
        read(tmp_path, name, FieldSpec("text"))
    with pytest.raises(CurateError, match=re.escape(f"{name}: no column 'uid' (the recipe's id")):
        read(tmp_path, name, FieldSpec("body", "uid"))
    with pytest.raises(CurateError, match=re.escape(f"{name}: id column 'score' is float")):
        read(tmp_path, name, FieldSpec("body", "score"))
    with pytest.raises(CurateError, match="column 'extra' is struct<k: int64>, which cannot be"):
        read(tmp_path, name, FieldSpec("body", keep_fields={"extra": pa.int64()}))


def test_dictionary_and_view_text_columns(tmp_path: Path) -> None:
    t = pa.table(
        {
            "text": pa.array(["x", "y", "x"]).dictionary_encode(),
            "t2": pa.array(["p", "q", "r"], pa.string_view()),
        }
    )
    write(tmp_path, "a.arrow", t)
    rows, _, _ = read(tmp_path, "a.arrow", FieldSpec("text", keep_fields={"t2": pa.string()}))
    assert [(r["text"], r["t2"]) for r in rows] == [("x", "p"), ("y", "q"), ("x", "r")]


def test_invalid_utf8_in_a_string_column_is_quarantined(tmp_path: Path) -> None:
    good = pa.array(["ok", "bad", "fine"])
    data = good.buffers()[2].to_pybytes().replace(b"bad", b"b\xffd")
    broken = pa.Array.from_buffers(pa.string(), 3, [None, good.buffers()[1], pa.py_buffer(data)])
    write(tmp_path, "a.arrow", pa.table({"text": broken}))
    rows, bad, _ = read(tmp_path, "a.arrow", FieldSpec())
    assert [r["text"] for r in rows] == ["ok", "fine"]
    assert [(q.line, q.reason) for q in bad] == [(2, "text field 'text' is not valid UTF-8")]


def test_batches_are_cut_and_joined_to_about_batch_bytes(tmp_path: Path) -> None:
    big = pa.table({"text": ["x" * 1000] * 300})
    write(tmp_path, "big.arrow", big, chunk=300)  # one huge batch
    small = pa.table({"text": ["y" * 10] * 3000})
    write(tmp_path, "small.arrow", small, chunk=3)  # many tiny batches
    for name, n in (("big.arrow", 300), ("small.arrow", 3000)):
        rows, _, batches = read(tmp_path, name, FieldSpec(), batch_bytes=20_000)
        assert len(rows) == n and [r["id"] for r in rows] == [f"{name}:{i}" for i in range(n)]
        sizes = [sum(len(t) for t in b.column("text").to_pylist()) for b in batches]
        assert all(20_000 <= s < 40_000 for s in sizes[:-1]) and 0 < sizes[-1] < 40_000


def write_saved(folder: Path, shards: list[pa.Table]) -> None:
    folder.mkdir(parents=True)
    names = []
    for i, t in enumerate(shards):
        name = f"data-{i:05d}-of-{len(shards):05d}.arrow"
        with pa.ipc.new_stream(folder / name, t.schema) as w:
            w.write_table(t)
        names.append(name)
    (folder / "state.json").write_text(
        json.dumps({"_data_files": [{"filename": n} for n in names]})
    )


def test_saved_dataset_shards_in_state_json_order(tmp_path: Path) -> None:
    shards = [pa.table({"text": [f"s{s}r{r}" for r in range(10 + s)]}) for s in range(3)]
    write_saved(tmp_path / "saved", shards)
    rows, _, _ = read(tmp_path, "saved", FieldSpec(), target=1)
    assert [r["text"] for r in rows] == [f"s{s}r{r}" for s in range(3) for r in range(10 + s)]
    assert [r["id"] for r in rows] == [f"saved:{i}" for i in range(33)]
    parts = plan_partitions(discover_inputs(["saved"], tmp_path), 1)
    assert [(p.start, p.stop, p.first_row) for p in parts] == [(0, 1, 0), (1, 2, 10), (2, 3, 21)]


def test_real_save_to_disk_folder(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"text": [f"doc {i}" for i in range(50)], "n": list(range(50))})
    ds.save_to_disk(str(tmp_path / "hf"), num_shards=2)
    rows, bad, _ = read(tmp_path, "hf", FieldSpec(keep_fields={"n": pa.int64()}), target=1)
    assert bad == [] and [r["n"] for r in rows] == list(range(50))
    assert rows[49]["id"] == "hf:49"


def test_input_changed_after_discovery_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, "a.parquet", table(5))
    parts = plan_partitions(discover_inputs(["a.parquet"], tmp_path), 10**9)
    write(tmp_path, "a.parquet", table(6))
    with pytest.raises(
        CurateError, match=re.escape("input 'a.parquet' changed while the run read it (size ")
    ):
        list(read_partition(parts[0], FieldSpec("body")))


def test_kept_field_named_like_a_core_column_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, "a.parquet", table(5))
    with pytest.raises(CurateError, match="kept field 'id' would replace"):
        read(tmp_path, "a.parquet", FieldSpec("body", keep_fields={"id": pa.string()}))


def test_saved_dataset_shard_changed_after_discovery_is_an_error(tmp_path: Path) -> None:
    write_saved(tmp_path / "saved", [pa.table({"text": ["a", "b"]})])
    parts = plan_partitions(discover_inputs(["saved"], tmp_path), 10**9)
    with pa.ipc.new_stream(
        tmp_path / "saved" / "data-00000-of-00001.arrow", pa.schema([("text", pa.string())])
    ) as w:
        w.write_table(pa.table({"text": ["rewritten", "with", "more rows"]}))
    with pytest.raises(
        CurateError, match=re.escape("shard 'data-00000-of-00001.arrow' of input 'saved' changed")
    ):
        list(read_partition(parts[0], FieldSpec()))

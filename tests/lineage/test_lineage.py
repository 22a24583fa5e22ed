"""Every written document traces to its input file, line and offset, and to its place in the
output (curate.lineage, curate.output.lineage_rows): real inputs on disk, real runs."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import REPO

import curate
from curate.lineage.lookup import Lineage
from curate.verify import verify

TOKENIZER = str(REPO / "sample_data" / "tokenizer")


def run(folder: Path, **recipe: Any) -> curate.Version:
    body: dict[str, Any] = {
        "name": "t",
        "output": {"root": "out", "fsync": False},
        "engine": {"workers": 1},
        "stages": [{"normalize": {}}],
    }
    body.update(recipe)
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return curate.run(path)


def text_of(i: int) -> str:
    return f"Document {i} tells " + " ".join(f"w{(i * 7 + k) % 89}" for k in range(6 + i % 11))


def write_messy_jsonl(path: Path, n: int) -> dict[str, int]:
    """n documents with a blank line, a broken line and a CRLF line among them; returns each
    document's 1-based line."""
    lines, where = [], {}
    for i in range(n):
        if i == 5:
            lines.append("")
        if i == 9:
            lines.append('{"id": "broken", "text": ')
        lines.append(json.dumps({"id": f"d{i}", "text": text_of(i)}))
        where[f"d{i}"] = len(lines)
    path.write_text("\n".join(lines) + "\n")
    return where


def lineage_rows(version: curate.Version) -> list[dict[str, Any]]:
    return Lineage(version).table().to_pylist()


def test_jsonl_documents_name_their_line_and_offset_across_partitions(tmp_path: Path) -> None:
    where = write_messy_jsonl(tmp_path / "a.jsonl", 400)
    v = run(tmp_path, inputs=["a.jsonl"], id_field="id", partition_size="4KB", batch_size="1KB")
    assert len(v.manifest["partitions"]) > 3  # lines past the first partition are counted
    data = (tmp_path / "a.jsonl").read_bytes()
    rows = lineage_rows(v)
    assert len(rows) == v.counts["written"] == 400
    for r in rows:
        assert r["line"] == where[r["id"]], r
        line = data[r["offset"] :].split(b"\n", 1)[0]
        assert json.loads(line)["id"] == r["id"]
        assert v.manifest["inputs"][r["input"]]["path"].endswith("a.jsonl")
    shard = v.to_arrow()
    assert [r["id"] for r in rows] == shard.column("id").to_pylist()  # in output order
    assert [(r["shard"], r["row"]) for r in rows] == [(0, i) for i in range(400)]
    bad = v.quarantined().to_pylist()  # the quarantined line: file, line, offset
    assert [(q["file"], q["line"]) for q in bad] == [("a.jsonl", 11)]
    assert data[bad[0]["offset"] :].startswith(b'{"id": "broken"')
    assert verify(v.path) == []


def test_lookup_by_id_reads_the_one_row(tmp_path: Path) -> None:
    write_messy_jsonl(tmp_path / "a.jsonl", 50)
    v = run(tmp_path, inputs=["a.jsonl"], id_field="id")
    lineage = Lineage(v)
    (found,) = lineage.find("d17")
    assert found["id"] == "d17" and found["line"] == 20
    assert lineage.find("nope") == []


def test_compressed_jsonl_lines_and_stream_offsets(tmp_path: Path) -> None:
    where = write_messy_jsonl(tmp_path / "plain.jsonl", 60)
    raw = (tmp_path / "plain.jsonl").read_bytes()
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(raw, mtime=0))
    (tmp_path / "plain.jsonl").unlink()
    v = run(tmp_path, inputs=["a.jsonl.gz"], id_field="id")
    for r in lineage_rows(v):
        assert r["line"] == where[r["id"]]
        assert json.loads(raw[r["offset"] :].split(b"\n", 1)[0])["id"] == r["id"]


def test_parquet_and_arrow_rows_counted_past_quarantined_ones(tmp_path: Path) -> None:
    texts = [text_of(i) for i in range(30)]
    texts[4] = None  # a null text: quarantined as row 5
    table = pa.table({"id": [f"p{i}" for i in range(30)], "text": texts})
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=7)
    with pa.ipc.new_file(str(tmp_path / "b.arrow"), table.schema) as w:
        w.write_table(table.rename_columns(["id", "text"]).set_column(
            0, "id", pa.array([f"q{i}" for i in range(30)])), max_chunksize=9)  # fmt: skip
    v = run(tmp_path, inputs=["a.parquet", "b.arrow"], id_field="id")
    rows = lineage_rows(v)
    assert len(rows) == 58
    for r in rows:
        assert r["line"] == int(r["id"][1:]) + 1 and r["offset"] is None
        name = v.manifest["inputs"][r["input"]]["path"]
        assert name.endswith("a.parquet" if r["id"][0] == "p" else "b.arrow")
    assert sorted(q["line"] for q in v.quarantined().to_pylist()) == [5, 5]


def test_a_text_folder_names_each_member(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    for i in range(5):
        (folder / f"n{i}.txt").write_text(text_of(i))
    v = run(tmp_path, inputs=["notes/"])
    rows = lineage_rows(v)
    assert sorted(r["id"] for r in rows) == [f"notes/n{i}.txt" for i in range(5)]
    assert {(r["input"], r["line"], r["offset"]) for r in rows} == {(0, None, None)}


def packed(tmp_path: Path, workers: int = 1, root: str = "out") -> curate.Version:
    if not (tmp_path / "a.jsonl").exists():
        write_messy_jsonl(tmp_path / "a.jsonl", 300)
        write_messy_jsonl(tmp_path / "b.jsonl", 120)
        text = (tmp_path / "b.jsonl").read_text().replace('"d', '"b').replace("Doc", "Not")
        (tmp_path / "b.jsonl").write_text(text)
    return run(
        tmp_path,
        inputs=["a.jsonl", "b.jsonl"],
        id_field="id",
        partition_size="4KB",
        output={"root": root, "fsync": False},
        engine={"workers": workers},
        stages=[
            {"normalize": {}},
            {"exact_dedup": {}},
            {"tokenize": {"source": TOKENIZER, "pack": {"seq_len": 64}}},
        ],
    )


def test_packed_rows_point_at_each_document_s_first_token(tmp_path: Path) -> None:
    v = packed(tmp_path)
    rows = lineage_rows(v)
    assert len(rows) == v.counts["written"] == 420
    shards = [pa.ipc.open_stream(v.path / s["path"]).read_all() for s in v.manifest["shards"]]
    for r in rows:
        row = shards[r["shard"]].slice(r["row"], 1).to_pylist()[0]
        k = row["doc_ids"].index(r["id"])
        assert row["doc_starts"][k] == r["start"] and row["doc_offsets"][k] == 0
    tail = [s["path"] for s in v.manifest["shards"]].index(v.manifest["packing"]["tail_shards"][0])
    assert any(r["shard"] == tail for r in rows)  # documents packed at publish too
    assert verify(v.path) == []


def test_lineage_is_the_same_bytes_with_more_workers(tmp_path: Path) -> None:
    one = packed(tmp_path, workers=1, root="one")
    two = packed(tmp_path, workers=2, root="two")
    digests = [{r["path"]: r["sha256"] for r in v.manifest["lineage"]} for v in (one, two)]
    assert digests[0] == digests[1]
    for rel in digests[0]:
        data = [hashlib.sha256((v.path / rel).read_bytes()).hexdigest() for v in (one, two)]
        assert data[0] == data[1] == digests[0][rel]


@pytest.mark.parametrize("damage", ["documents", "ids"])
def test_verify_names_a_damaged_lineage_file(tmp_path: Path, damage: str) -> None:
    from conftest import flip_byte, writable

    write_messy_jsonl(tmp_path / "a.jsonl", 40)
    v = run(tmp_path, inputs=["a.jsonl"], id_field="id")
    writable(v.path)
    flip_byte(v.path / "lineage" / f"{damage}.arrow")
    assert any(f"lineage/{damage}.arrow" in p for p in verify(v.path))


def test_a_rerun_replayed_from_the_stage_cache_publishes_the_same_lineage(tmp_path: Path) -> None:
    write_messy_jsonl(tmp_path / "a.jsonl", 200)
    stages: list[dict[str, Any]] = [
        {"normalize": {"collapse_spaces": True}},
        {"exact_dedup": {}},
        {"filter_length": {"min_words": 3}},
        {"tokenize": {"source": TOKENIZER, "pack": {"seq_len": 64}}},
    ]
    common = {"inputs": ["a.jsonl"], "id_field": "id", "partition_size": "4KB"}
    run(tmp_path, **common, stages=stages)  # fills the cache
    stages[3]["tokenize"]["pack"]["seq_len"] = 32
    again = run(tmp_path, **common, stages=stages)
    reused = [s.get("cache", {}).get("reused", 0) for s in again.manifest["stages"]]
    assert reused[0] > 0 and reused[1] > 0  # normalize and the dedup replayed, not run
    scratch = run(tmp_path, **common, stages=stages, output={"root": "scratch", "fsync": False})
    assert again.manifest["lineage"] == scratch.manifest["lineage"]
    assert lineage_rows(again) == lineage_rows(scratch)

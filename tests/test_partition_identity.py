"""A partition is named by what it holds (its input's name and range), never by its place in
the run's plan: its shards keep their names and bytes when other inputs come, and when its
own input is only touched (issue 16 point 1)."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash
from conftest import REPO, corpus, write_jsonl, write_recipe

import curate
from curate.io.partition_key import partition_key
from curate.output.shards import read_stream
from curate.stages.base import MapStage, StageParams, StageResult

STAGES = [{"normalize": {}}, {"exact_dedup": {}}]
KEY = re.compile(r"[0-9a-f]{16}")


class Stop(MapStage):
    """Stops the run where it is: its staging folder stays, for a test to read."""

    name = "stop"
    Params = StageParams

    def process(self, batch: pa.RecordBatch) -> StageResult:
        raise RuntimeError("stopped on purpose")


def build(tmp_path: Path, inputs: list[str], **overrides: Any) -> curate.Version:
    settings: dict[str, Any] = {
        "inputs": inputs,
        "stages": STAGES,
        "partition_size": "6KB",
        "output": {"root": "out", "fsync": False, "shard_size": "4KB"},
    }
    recipe = write_recipe(tmp_path, **(settings | overrides))
    return curate.run(recipe)


def shards(version: curate.Version) -> list[tuple[str, str]]:
    return [(s["path"], s["sha256"]) for s in version.manifest["shards"]]


def shards_of(version: curate.Version, names: set[str]) -> list[tuple[str, str]]:
    """The shards of the partitions of these inputs, in the version's order."""
    keys = {p["key"] for p in version.manifest["partitions"] if p["input"] in names}
    return [s for s in shards(version) if key_of(s[0]) in keys]


def key_of(shard: str) -> str:
    """The partition key a shard's name carries (`part-<key>-N.arrow`, `group-<key>.arrow`)."""
    return re.findall(r"-([0-9a-f]{16})", shard)[0]


def unique_docs(prefix: str, n: int) -> list[dict[str, Any]]:
    return [
        {"id": d["id"], "text": f"{prefix} {d['text']}"}
        for d in corpus(n, dup_every=0, prefix=prefix)
    ]


@pytest.mark.parametrize("id_field", ["id", None], ids=["own-ids", "derived-ids"])
def test_touching_an_input_changes_no_shard(tmp_path: Path, id_field: str | None) -> None:
    """Every unit a key counts in (bytes, a compressed stream, row groups), with ids the
    records carry or ids derived from the input: touching every input changes not one id
    or byte of any shard."""
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(300, prefix="a"))
    plain = tmp_path / "data" / "b.jsonl"
    write_jsonl(plain, corpus(300, prefix="b"))
    (tmp_path / "data" / "b.jsonl.gz").write_bytes(gzip.compress(plain.read_bytes()))
    plain.unlink()
    table = pa.Table.from_pylist(corpus(300, prefix="c"))
    pq.write_table(table, tmp_path / "data" / "c.parquet", row_group_size=50)
    inputs = ["data/*.jsonl", "data/*.jsonl.gz", "data/*.parquet"]
    v1 = build(tmp_path, inputs, id_field=id_field)
    assert {p["unit"] for p in v1.manifest["partitions"]} == {"bytes", "stream", "row_groups"}
    assert len(v1.manifest["partitions"]) >= 5
    for path in (tmp_path / "data").iterdir():
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert build(tmp_path, inputs, id_field=id_field).path == v1.path  # found (issue 17)
    shutil.rmtree(tmp_path / "out" / "t" / ".index")  # unfindable: build it again
    v2 = build(tmp_path, inputs, id_field=id_field)
    assert v2.fingerprint != v1.fingerprint  # a new version was built, not the old one found
    assert shards(v2) == shards(v1)
    assert v2.manifest["partitions"] == v1.manifest["partitions"]  # keys and digests too


def test_appending_an_input_keeps_every_old_partitions_shards(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", unique_docs("a", 300))
    write_jsonl(tmp_path / "data" / "b.jsonl", corpus(300, prefix="b"))
    v1 = build(tmp_path, ["data/*.jsonl"])
    # the new file repeats documents of the old ones: only its own copies go
    copies = [{"id": f"copy-{d['id']}", "text": d["text"]} for d in unique_docs("a", 40)]
    docs = unique_docs("c", 200) + copies
    write_jsonl(tmp_path / "data" / "c.jsonl", docs)
    v2 = build(tmp_path, ["data/*.jsonl"])
    old = shards(v1)
    assert shards(v2)[: len(old)] == old  # same names, same bytes, still first
    assert shards_of(v2, {"data/c.jsonl"}) == shards(v2)[len(old) :]
    assert v2.manifest["partitions"][: len(v1.manifest["partitions"])] == v1.manifest["partitions"]
    removed = v2.manifest["counts"]["removed"]["1:exact_dedup"]["duplicate"]
    assert removed == v1.manifest["counts"]["removed"]["1:exact_dedup"]["duplicate"] + 40


def test_inserting_an_input_before_the_others_keeps_theirs(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "b.jsonl", corpus(300, prefix="b"))
    write_jsonl(tmp_path / "data" / "c.jsonl", corpus(300, prefix="c"))
    v1 = build(tmp_path, ["data/*.jsonl"])
    write_jsonl(tmp_path / "data" / "a.jsonl", unique_docs("a", 300))  # no duplicate of theirs
    v2 = build(tmp_path, ["data/*.jsonl"])
    assert v2.manifest["partitions"][0]["input"] == "data/a.jsonl"
    later = {"data/b.jsonl", "data/c.jsonl"}
    assert shards_of(v2, later) == shards(v1)
    assert shards(v2)[-len(shards(v1)) :] == shards(v1)  # input order: the new file's first


def test_an_inserted_input_changes_only_what_its_duplicates_decide(tmp_path: Path) -> None:
    """Ties go by input order: a copy in a file inserted before the others is the one kept,
    so the partition that held the first copy loses it, and no other partition changes."""
    write_jsonl(tmp_path / "data" / "b.jsonl", unique_docs("b", 300))
    write_jsonl(tmp_path / "data" / "c.jsonl", unique_docs("c", 300))
    v1 = build(tmp_path, ["data/*.jsonl"], partition_size="100MB")
    copy = unique_docs("c", 300)[-1]
    write_jsonl(tmp_path / "data" / "a.jsonl", [{"id": "a-copy", "text": copy["text"]}])
    v2 = build(tmp_path, ["data/*.jsonl"], partition_size="100MB")
    assert shards_of(v2, {"data/b.jsonl"}) == shards_of(v1, {"data/b.jsonl"})
    assert shards_of(v2, {"data/c.jsonl"}) != shards_of(v1, {"data/c.jsonl"})
    rejected = pa.concat_tables(read_stream(v2.path / r["path"]) for r in v2.manifest["rejected"])
    assert rejected.select(["id", "duplicate_of"]).to_pylist() == [
        {"id": copy["id"], "duplicate_of": "a-copy"}
    ]


def test_ties_go_by_input_order_not_by_key(tmp_path: Path) -> None:
    """Keys are hashes, in no useful order: the input the recipe lists first keeps the copy,
    whichever of the two keys sorts first."""
    text = "the same document in both files, word for word"
    names = [f"data/{n}.jsonl" for n in ("p", "q")]
    for name in names:
        write_jsonl(tmp_path / name, [{"id": f"{Path(name).stem}-1", "text": text}])
    for order in (names, names[::-1]):
        kept_from = Path(order[0]).stem
        version = build(tmp_path, order, output={"root": f"out-{kept_from}", "fsync": False})
        assert [p["input"] for p in version.manifest["partitions"]] == order
        table = version.to_arrow()
        assert table.column("id").to_pylist() == [f"{kept_from}-1"]


def test_manifest_lists_each_partitions_key_range_and_digest(tmp_path: Path) -> None:
    data = tmp_path / "data" / "a.jsonl"
    write_jsonl(data, corpus(300, prefix="a"))
    version = build(tmp_path, ["data/a.jsonl"])
    parts = version.manifest["partitions"]
    raw = data.read_bytes()
    assert len(parts) > 1 and parts[0]["start"] == 0 and parts[-1]["stop"] == len(raw)
    for part in parts:
        assert part["unit"] == "bytes" and part["input"] == "data/a.jsonl"
        assert part["key"] == partition_key("data/a.jsonl", "bytes", part["start"], part["stop"])
        piece = raw[part["start"] : part["stop"]]
        assert part["digest"] == f"xxh3_128:{xxhash.xxh3_128_hexdigest(piece)}"
        assert part["documents"] == piece.count(b"\n")
    names = {key_of(s["path"]) for s in version.manifest["shards"]}
    assert names <= {p["key"] for p in parts}
    inputs = version.manifest["inputs"]
    assert sum(p["documents"] for p in parts) == inputs[0]["documents"]


def test_no_file_a_run_leaves_holds_a_partitions_place_in_the_plan(tmp_path: Path) -> None:
    """Staged rows, summaries and decisions keep each row's number within its partition;
    every file is named by its partition's key. The run stops in its last pass (a stage that
    raises), so its staging folder stays to be read."""
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(300, prefix="a"))
    write_jsonl(tmp_path / "data" / "b.jsonl", corpus(300, prefix="b"))
    with pytest.raises(RuntimeError, match="stopped on purpose"):
        build(tmp_path, ["data/*.jsonl"], stages=[*STAGES, {"test_partition_identity:Stop": {}}])
    staging = next((tmp_path / "out" / "t").glob(".staging-*"))
    staged = sorted(staging.glob("pass-*/*.arrow"))
    kinds = {p.name.split("-")[0] for p in staged}
    assert {"data", "summary", "decision"} <= kinds
    for path in staged:
        assert KEY.fullmatch(path.name.split("-")[1].removesuffix(".arrow")), path.name
        if path.name.startswith("summary-"):
            table = pa.ipc.open_file(str(path)).read_all()
        else:
            table = read_stream(path)
        if "_order" in table.column_names:
            orders = table.column("_order").to_numpy()
            assert (orders < np.uint64(1 << 40)).all(), path.name
    for record in staging.glob("pass-*/part-*.json"):
        data = json.loads(record.read_text())
        assert KEY.fullmatch(data["partition"]) and record.name == f"part-{data['partition']}.json"


def test_packed_rows_are_named_by_their_partitions_key(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(400, dup_every=0))
    tokenizer = str(REPO / "sample_data" / "tokenizer")
    stages = [{"tokenize": {"source": tokenizer, "pack": {"seq_len": 64}}}]
    version = build(tmp_path, ["data/a.jsonl"], stages=stages)
    keys = [p["key"] for p in version.manifest["partitions"]]
    assert len(keys) > 1
    ids = version.to_arrow().column("id").to_pylist()
    own = [i for i in ids if not i.startswith("pack-tail-")]  # the tail shard's rows aside
    assert {i.split("-")[1] for i in own} == set(keys)
    assert own[0] == f"pack-{keys[0]}-000000000"

"""minhash_dedup's `cluster_size`: each kept document's near-duplicate cluster size, in a
column of its own; nothing else about the output changes, on any worker count."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import write_jsonl, write_recipe

import curate
from curate.minhash.planted import planted_corpus


def planted(folder: Path) -> list[dict[str, str]]:
    docs = [{"id": d["id"], "text": d["text"]} for d in planted_corpus(60, seed=5).docs]
    docs += [{"id": "empty", "text": ""}, {"id": "blank", "text": "  \n "}]  # never clustered
    half = len(docs) // 2
    write_jsonl(folder / "data" / "a.jsonl", docs[:half])
    write_jsonl(folder / "data" / "b.jsonl", docs[half:])
    return docs


def build(folder: Path, root: str, workers: int = 1, **minhash: Any) -> curate.Version:
    recipe = write_recipe(
        folder,
        stages=[{"normalize": {}}, {"minhash_dedup": minhash}, {"filter_length": {}}],
        partition_size="8KB",
        output={"root": root, "fsync": False},
        engine={"workers": workers},
    )
    return curate.run(recipe)


def near_duplicates(version: curate.Version) -> pa.Table:
    tables = [pa.ipc.open_stream(version.path / f["path"]).read_all()
              for f in version.manifest["rejected"]]  # fmt: skip
    rejected = pa.concat_tables(tables)
    return rejected.filter(pc.equal(rejected.column("stage"), "minhash_dedup"))


def shas(version: curate.Version, key: str) -> list[str]:
    return [f["sha256"] for f in version.manifest[key]]


@pytest.mark.parametrize("verify", ["exact", "estimate"])
def test_sizes_count_each_cluster_and_nothing_else_changes(tmp_path: Path, verify: str) -> None:
    docs = planted(tmp_path)
    plain = build(tmp_path, "plain", verify=verify)
    sized = build(tmp_path, "sized", verify=verify, cluster_size=True)
    table = sized.to_arrow()
    assert table.schema.field("cluster_size").type == pa.int64()
    assert "cluster_size" not in plain.to_arrow().column_names
    # the same documents, texts and rejected rows: only the column is new
    assert table.drop_columns(["cluster_size"]).equals(plain.to_arrow())
    assert shas(sized, "rejected") == shas(plain, "rejected")
    assert sized.manifest["counts"]["removed"] == plain.manifest["counts"]["removed"]
    # each kept document's size: itself and every removed document naming it
    named = Counter(near_duplicates(sized).column("duplicate_of").to_pylist())
    sizes = dict(zip(table.column("id").to_pylist(), table.column("cluster_size").to_pylist(),
                     strict=True))  # fmt: skip
    assert sizes == {i: 1 + named.get(i, 0) for i in sizes}
    assert max(sizes.values()) >= 3 and sizes["empty"] == sizes["blank"] == 1
    assert sum(sizes.values()) == len(docs)  # every document is in exactly one cluster
    record = sized.manifest["stages"][1]
    assert record["docs_out"] == len(sizes) and record["changed"] == 0  # texts untouched
    assert record["details"]["clusters"] == sum(1 for n in sizes.values() if n > 1)


def test_same_bytes_on_one_and_two_workers_and_from_the_cache(tmp_path: Path) -> None:
    planted(tmp_path)
    one = build(tmp_path, "one", workers=1, cluster_size=True)
    two = build(tmp_path, "two", workers=2, cluster_size=True)
    assert shas(one, "shards") == shas(two, "shards")
    assert shas(one, "rejected") == shas(two, "rejected")
    # the stage cache: signatures kept by a run without sizes serve one with them
    cached = tmp_path / "cached"
    cached.mkdir()
    (cached / "data").symlink_to(tmp_path / "data", target_is_directory=True)
    build(cached, "out")
    again = build(cached, "out", cluster_size=True)
    assert shas(again, "shards") == shas(one, "shards")


def test_later_stages_carry_the_column_and_the_pipeline_adds_it() -> None:
    text = " ".join(f"word{i} token{i % 7}" for i in range(60))
    rows = [{"id": "a", "text": text}, {"id": "b", "text": text + " extra"},
            {"id": "c", "text": text + " more"}, {"id": "d", "text": "other words " * 20}]  # fmt: skip
    result = (
        curate.Pipeline()
        .add("minhash_dedup", cluster_size=True)
        .add("exact_dedup")
        .add("normalize")
        .process(rows)
    )
    table = result.table
    got = dict(zip(table.column("id").to_pylist(), table.column("cluster_size").to_pylist(),
                   strict=True))  # fmt: skip
    assert got == {"a": 3, "d": 1}

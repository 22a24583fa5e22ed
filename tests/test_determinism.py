"""The same recipe and inputs give byte-identical shards with 1 worker and with 2."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import corpus, write_jsonl, write_recipe

import curate


def shard_hashes(version: curate.Version) -> list[tuple[str, str]]:
    return [(s["path"], s["sha256"]) for s in version.manifest["shards"]]


def test_one_and_two_workers_give_identical_shards(tmp_path: Path) -> None:
    docs = corpus(4000, dup_every=4)
    for i in range(4):  # 4 files, each split into byte-range partitions
        write_jsonl(tmp_path / "data" / f"f{i}.jsonl", docs[i * 1000 : (i + 1) * 1000])
    stages = [{"normalize": {}}, {"filter_length": {"min_words": 6}}, {"exact_dedup": {}}]
    versions = []
    for workers in (1, 2):
        recipe = write_recipe(
            tmp_path,
            stages=stages,
            partition_size="20KB",
            output={"root": f"out-{workers}", "fsync": False, "shard_size": "16KB"},
            engine={"workers": workers},
        )
        versions.append(curate.run(recipe))
    one, two = versions
    assert sum(i["partitions"] for i in one.manifest["inputs"]) >= 8
    assert shard_hashes(one) == shard_hashes(two)
    assert one.fingerprint == two.fingerprint  # the engine is not part of what was made
    assert one.manifest["counts"] == two.manifest["counts"]
    removed = one.manifest["counts"]["removed"]
    assert removed["2:exact_dedup"]["duplicate"] > 0
    for name in ("rejected", "quarantine"):
        assert [f["sha256"] for f in one.manifest[name]] == [
            f["sha256"] for f in two.manifest[name]
        ]
    assert one.manifest["statistics"] == two.manifest["statistics"]  # statistics.json's sha256
    assert (one.path / "statistics.json").read_bytes() == (
        two.path / "statistics.json"
    ).read_bytes()
    for name in ("dataset_dict.json", "train/state.json", "train/dataset_info.json"):
        assert (one.path / name).read_bytes() == (two.path / name).read_bytes()
    # shards are named by their partition's key, in input order (the manifest's partitions)
    assert one.manifest["partitions"] == two.manifest["partitions"]
    keys = [p["key"] for p in one.manifest["partitions"]]
    named = [re.findall(r"-([0-9a-f]{16})", s["path"])[0] for s in one.manifest["shards"]]
    assert sorted(set(named), key=keys.index) == list(dict.fromkeys(named))
    state = json.loads((one.path / "train" / "state.json").read_text())  # from train/
    assert [f["filename"] for f in state["_data_files"]] == [
        "../" + s["path"] for s in one.manifest["shards"]
    ]


def test_line_dedup_gives_identical_shards_on_one_and_two_workers(tmp_path: Path) -> None:
    """A barrier whose apply changes text (line_dedup), then one that sees that text."""
    docs = corpus(1200, dup_every=0)
    boiler = ["Home | About | Contact", "We use cookies.", "All rights reserved."]
    for i, d in enumerate(docs):
        d["text"] = "\n".join([*boiler[: i % 4], d["text"], *boiler[i % 3 :]])
    for i in range(3):
        write_jsonl(tmp_path / "data" / f"f{i}.jsonl", docs[i * 400 : (i + 1) * 400])
    stages = [{"line_dedup": {}}, {"exact_dedup": {}}, {"filter_length": {"min_words": 4}}]
    versions = []
    for workers in (1, 2):
        recipe = write_recipe(tmp_path, stages=stages, partition_size="16KB",
                              output={"root": f"out-{workers}", "fsync": False,
                                      "shard_size": "16KB"},
                              engine={"workers": workers})  # fmt: skip
        versions.append(curate.run(recipe))
    one, two = versions
    assert sum(i["partitions"] for i in one.manifest["inputs"]) >= 6
    assert one.manifest["stages"][0]["changed"] > 0
    assert shard_hashes(one) == shard_hashes(two)
    assert one.manifest["counts"] == two.manifest["counts"]
    assert [s["counters"] for s in one.manifest["stages"][:1]] == [
        s["counters"] for s in two.manifest["stages"][:1]
    ]
    assert (one.path / "statistics.json").read_bytes() == (
        two.path / "statistics.json"
    ).read_bytes()

"""Held-out splits end to end: a DatasetDict on disk, verified, deterministic, stable, counted."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pytest
from conftest import REPO, corpus, write_jsonl, write_recipe

import curate
from curate.errors import CurateError
from curate.loader import open_tokens
from curate.output.splits import SplitSpec
from curate.verify import verify

SPLIT = {"validation": 0.1, "seed": 5}


def run(tmp_path: Path, root: str = "out", **overrides: object) -> curate.Version:
    settings: dict[str, object] = {
        "split": SPLIT,
        "output": {"root": root, "fsync": False, "shard_size": "16KB"},
    }
    return curate.run(write_recipe(tmp_path, **(settings | overrides)))


def split_ids(version: curate.Version, name: str) -> list[str]:
    return version.to_arrow(name).column("id").to_pylist()


def test_a_split_version_loads_as_a_datasetdict_and_verifies(tmp_path: Path) -> None:
    docs = corpus(3000)
    write_jsonl(tmp_path / "data" / "a.jsonl", docs)
    version = run(tmp_path)
    ds = datasets.load_from_disk(str(version.path))
    assert isinstance(ds, datasets.DatasetDict) and list(ds) == ["train", "validation"]
    record = version.manifest["splits"]
    assert record["seed"] == 5 and list(record["splits"]) == ["train", "validation"]
    counts = {k: v["documents"] for k, v in record["splits"].items()}
    assert {k: ds[k].num_rows for k in ds} == counts
    assert sum(counts.values()) == version.counts["written"]  # the splits reconcile
    assert 0.07 < counts["validation"] / version.counts["written"] < 0.13
    # exactly the documents the documented hash puts there, and each in one split only
    train, valid = split_ids(version, "train"), split_ids(version, "validation")
    which = SplitSpec(**SPLIT).assign(pa.array(train + valid))  # type: ignore[arg-type]
    assert (which[: len(train)] == 0).all() and (which[len(train) :] == 1).all()
    assert len(set(train) | set(valid)) == version.counts["written"]
    assert ds["validation"]["id"] == valid and ds["validation"].split == "validation"
    # each split folder is itself a Dataset folder, and the readers take a split's name
    alone = datasets.load_from_disk(str(version.path / "validation"))
    assert isinstance(alone, datasets.Dataset) and alone["id"] == valid
    assert version.to_polars("validation")["id"].to_list() == valid
    assert isinstance(version.to_dataset(), datasets.DatasetDict)
    assert version.to_dataset("train")["id"] == train
    with pytest.raises(CurateError, match="has splits train, validation"):
        version.to_arrow()
    with pytest.raises(CurateError, match="no split 'test'"):
        version.to_arrow("test")
    assert not (version.path / "state.json").exists()  # what tells datasets it is a dict
    assert verify(version.path) == []
    assert "validation" in repr(version)


def test_verify_names_a_damaged_split(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(500))
    version = run(tmp_path)
    state = version.path / "validation" / "state.json"
    os.chmod(version.path / "validation", 0o750)
    os.chmod(state, 0o640)
    state.unlink()
    shard = version.path / version.manifest["shards"][0]["path"]
    os.chmod(shard, 0o640)
    with open(shard, "r+b") as f:
        f.seek(100)
        f.write(b"\x00\x01")
    problems = verify(version.path)
    assert "validation/state.json: missing" in problems
    assert any("sha256 differs" in p for p in problems)


def test_one_and_two_workers_write_the_same_split_shards(tmp_path: Path) -> None:
    docs = corpus(4000, dup_every=4)
    for i in range(4):
        write_jsonl(tmp_path / "data" / f"f{i}.jsonl", docs[i * 1000 : (i + 1) * 1000])
    one = run(tmp_path, "out-1", partition_size="20KB", engine={"workers": 1})
    two = run(tmp_path, "out-2", partition_size="20KB", engine={"workers": 2})
    shards = [(s["path"], s["sha256"], s["split"]) for s in one.manifest["shards"]]
    assert shards == [(s["path"], s["sha256"], s["split"]) for s in two.manifest["shards"]]
    assert {s[2] for s in shards} == {"train", "validation"}
    assert len({s[0].split("-")[1] for s in shards}) >= 8  # >= 8 partitions, each split
    assert one.manifest["splits"] == two.manifest["splits"]
    for name in ("dataset_dict.json", "train/state.json", "validation/state.json"):
        assert json.loads((one.path / name).read_text()) == json.loads(
            (two.path / name).read_text()
        )


def test_adding_documents_never_moves_one_between_splits(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(1500, dup_every=0))
    first = run(tmp_path, stages=[{"normalize": {}}])
    write_jsonl(tmp_path / "data" / "b.jsonl", corpus(1500, dup_every=0, prefix="e"))
    second = run(tmp_path, stages=[{"normalize": {}}])
    assert second.name != first.name
    for name in ("train", "validation"):
        before, after = set(split_ids(first, name)), set(split_ids(second, name))
        assert before <= after  # every old document is where it was
    grown = len(split_ids(second, "validation"))
    assert grown > len(split_ids(first, "validation"))


def test_an_empty_split_still_loads(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(3, dup_every=0))
    version = run(tmp_path, split={"validation": 0.0001})  # three documents: none held out
    ds = version.to_dataset()
    assert isinstance(ds, datasets.DatasetDict)
    assert ds["validation"].num_rows == 0 and ds["train"].num_rows == 3
    assert version.manifest["splits"]["splits"]["validation"]["shards"] == 1
    assert verify(version.path) == []


def test_packed_tokens_are_split_before_packing(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(2000, dup_every=0))
    tokenizer = str(REPO / "sample_data" / "tokenizer")
    stages = [{"tokenize": {"source": tokenizer, "pack": {"seq_len": 64}}}]
    version = run(tmp_path, stages=stages, split={"validation": 0.05, "test": 0.05})
    record = version.manifest["splits"]["splits"]
    assert list(record) == ["train", "validation", "test"]
    assert sum(r["documents"] for r in record.values()) == 2000 == version.counts["written"]
    assert sum(r["tokens"] for r in record.values()) == version.manifest["tokens"]
    assert verify(version.path) == []
    for name in record:
        table = version.to_arrow(name)
        docs = [d for row in table.column("doc_ids").to_pylist() for d in row]
        which = SplitSpec(validation=0.05, test=0.05).assign(pa.array(docs))
        assert (which == ["train", "validation", "test"].index(name)).all()
        assert table.column("id")[0].as_py().startswith(f"pack-{name}-")
        tokens = open_tokens(version.path, split=name, tokenizer=tokenizer)
        assert tokens.num_tokens == record[name]["tokens"]
        blocks = tokens.blocks(seed=1)
        assert len(blocks) > 0 and all(len(b) == 64 for b in blocks)
    assert open_tokens(version.path).split == "train"
    with pytest.raises(CurateError, match="no split 'dev'"):
        open_tokens(version.path, split="dev")


def test_a_version_without_split_is_one_dataset_to_curate_and_one_split_to_datasets(
    tmp_path: Path,
) -> None:
    """No split is recorded and the Python API gives one `Dataset`; `datasets` sees a
    DatasetDict of one split, train, so that load_dataset reads the folder too
    (curate.hf_layout); the shards stay where every version keeps them."""
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(100))
    version = curate.run(write_recipe(tmp_path))
    assert version.manifest["splits"] is None and version.splits == []
    assert all(s.get("split") is None for s in version.manifest["shards"])
    assert all(s["path"].startswith("shards/") for s in version.manifest["shards"])
    whole = datasets.load_from_disk(str(version.path))
    assert isinstance(whole, datasets.DatasetDict) and list(whole) == ["train"]
    ds = version.to_dataset()
    assert isinstance(ds, datasets.Dataset)
    assert ds["id"] == whole["train"]["id"] == version.to_arrow().column("id").to_pylist()
    assert not (version.path / "state.json").exists()
    assert verify(version.path) == []
    with pytest.raises(CurateError, match="has no splits"):
        version.to_arrow("validation")
    assert np.all(version.to_arrow().column("id").to_numpy(zero_copy_only=False) != "")


def test_a_killed_split_and_packed_run_resumes_identically(tmp_path: Path) -> None:
    """Each split's packer carries rows across checkpoints: a run killed while writing shards
    resumes to the same bytes as one that was never interrupted."""
    from test_crash_resume import curate_run, phases, published

    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(1500, dup_every=0))
    tokenizer = str(REPO / "sample_data" / "tokenizer")
    recipe = write_recipe(
        tmp_path,
        stages=[{"tokenize": {"source": tokenizer, "pack": {"seq_len": 64}}}],
        split={"validation": 0.2},
        partition_size="40KB",
        batch_size="3KB",
        output={"root": "out", "fsync": False, "shard_size": "4KB"},
    )
    root = tmp_path / "out" / "t"
    assert curate_run(recipe, tmp_path / "full.log") == 0
    reference = published(root)
    writes = phases(tmp_path / "full.log").count("shard_write")
    assert writes > 10
    for k in (2, writes // 2, writes - 1):
        shutil.rmtree(tmp_path / "out", ignore_errors=True)
        (tmp_path / "kill.log").unlink(missing_ok=True)
        assert curate_run(recipe, tmp_path / "kill.log", kill_at=f"shard_write:{k}") != 0
        assert curate_run(recipe, tmp_path / "resume.log") == 0
        assert published(root) == reference, k

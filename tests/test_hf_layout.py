"""Versions in the layout curate wrote before every version was a DatasetDict folder
(curate.hf_layout): a version without splits had `state.json` and
`dataset_info.json` on top and no `layout` in its manifest. Such a version, made here by
turning a fresh one into what an older store holds, still opens, verifies and loads as one
`Dataset`; a rerun of its recipe returns it without a rebuild; it is read as an input (as a
new one is, by naming the version folder) and as a mixture source, exports, and a purge
rewrites it in its own layout."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import datasets
import pytest
from conftest import REPO, corpus, sealed, writable, write_jsonl, write_recipe

import curate
from curate.export import export
from curate.forget_command import Selection, forget
from curate.hf_layout import dataset_info_json, state_json
from curate.mix.prepare import prepare
from curate.verify import verify

TOKENIZER = str(REPO / "sample_data" / "tokenizer")
NAME = "Zelda Quimby"
PACKED = [{"tokenize": {"source": TOKENIZER, "pack": {"seq_len": 16}}}]


def legacy(version: Path) -> None:
    """`version` as curate published a version without splits before: state.json and
    dataset_info.json on top, no dataset_dict.json, no train/, no `layout`."""
    writable(version)
    m = json.loads((version / "manifest.json").read_text())
    assert m.pop("layout") == "dataset_dict" and m["splits"] is None
    (version / "manifest.json").write_text(json.dumps(m, indent=2) + "\n")
    shutil.rmtree(version / "train")
    (version / "dataset_dict.json").unlink()
    shards = [s["path"] for s in m["shards"]]
    (version / "state.json").write_text(state_json(shards, m["fingerprint"]))
    about = f"curate dataset, fingerprint {m['fingerprint']}; see manifest.json"
    (version / "dataset_info.json").write_text(dataset_info_json(about))
    sealed(version)


def build(folder: Path, stages: list[dict[str, Any]] | None = None, **extra: Any) -> Path:
    docs = corpus(120)
    for i in (7, 33, 61):
        docs[i]["text"] = f"Ask {NAME} about note {i}: " + docs[i]["text"]
    write_jsonl(folder / "data" / "a.jsonl", docs[:60])
    write_jsonl(folder / "data" / "b.jsonl", docs[60:])
    recipe = write_recipe(folder, partition_size="2KB", stages=stages or [{"exact_dedup": {}}],
                          output={"root": "out", "fsync": False, "shard_size": "2KB"},
                          **extra)  # fmt: skip
    version = curate.run(recipe)
    version.release()
    return version.path


def ids(version: Path) -> list[str]:
    opened = curate.open(version)
    try:
        return list(opened.to_arrow().column("id").to_pylist())
    finally:
        opened.release()


def test_a_legacy_version_opens_verifies_and_loads_as_one_dataset(tmp_path: Path) -> None:
    v1 = build(tmp_path)
    written = ids(v1)
    legacy(v1)
    assert verify(v1) == []
    disk = datasets.load_from_disk(str(v1))
    assert isinstance(disk, datasets.Dataset) and disk["id"] == written
    opened = curate.open(v1)
    ds = opened.to_dataset()
    assert isinstance(ds, datasets.Dataset) and ds["id"] == written
    opened.release()
    writable(v1)  # a layout file missing is named, as in the new layout
    (v1 / "state.json").unlink()
    assert "state.json: missing" in verify(v1)


def test_a_rerun_returns_the_legacy_version_without_rebuilding_it(tmp_path: Path) -> None:
    v1 = build(tmp_path)
    legacy(v1)
    before = {p: p.stat().st_mtime_ns for p in v1.rglob("*")}
    again = curate.run(tmp_path / "recipe.yaml")
    again.release()
    assert again.path == v1 and not (tmp_path / "out" / "t" / "v2").exists()
    assert {p: p.stat().st_mtime_ns for p in v1.rglob("*")} == before
    assert (v1 / "state.json").is_file() and not (v1 / "dataset_dict.json").exists()


def test_a_legacy_and_a_new_version_read_as_inputs_give_the_same_rows(tmp_path: Path) -> None:
    old, new = build(tmp_path / "old"), build(tmp_path / "new")
    legacy(old)
    children = {}
    for name, parent in (("old", old), ("new", new)):
        folder = tmp_path / f"child-{name}"
        folder.mkdir()
        recipe = write_recipe(folder, inputs=[str(parent)], stages=[{"normalize": {}}])
        child = curate.run(recipe)
        child.release()
        m = json.loads((parent / "manifest.json").read_text())
        assert child.manifest["parents"] == [f"t/v1@{m['fingerprint']}"]
        children[name] = ids(child.path)
    assert children["old"] == children["new"] == ids(new) == ids(old)
    folder = tmp_path / "child-split"
    folder.mkdir()
    recipe = write_recipe(folder, inputs=[str(new / "train")], stages=[{"normalize": {}}])
    with pytest.raises(curate.CurateError, match="train/ folder of a curate version"):
        curate.run(recipe)


def test_a_legacy_version_exports_and_is_a_mixture_source(tmp_path: Path) -> None:
    v1 = build(tmp_path, stages=PACKED)
    legacy(v1)
    done = export(v1, "jsonl", tmp_path / "exported")
    assert verify(tmp_path / "exported") == []
    assert sum(part.rows for part in done.parts) == len(ids(v1))
    mixture = {"name": "mix", "budget": 2000, "seed": 3,
               "sources": [{"recipe": "recipe.yaml", "weight": 1.0, "max_epochs": 8}],
               "output": {"root": "out", "fsync": False}}  # fmt: skip
    (tmp_path / "mixture.yaml").write_text(json.dumps(mixture))
    mixed = prepare(tmp_path / "mixture.yaml")
    assert verify(mixed.path) == []
    assert (v1 / "state.json").is_file() and not (tmp_path / "out" / "t" / "v2").exists()
    mixed.release()


@pytest.mark.parametrize("stages", [None, PACKED], ids=["rows", "packed"])
def test_a_purge_rewrites_a_legacy_version_in_its_own_layout(
    tmp_path: Path, stages: list[dict[str, Any]] | None
) -> None:
    v1 = build(tmp_path, stages=stages)
    legacy(v1)
    done = forget(tmp_path / "recipe.yaml", Selection(match=re.compile(NAME)), "asked")
    assert done.version.name == "v2"
    v2 = done.version.path
    assert (v2 / "dataset_dict.json").is_file() and not (v2 / "state.json").exists()
    shared = [p for p in (v1 / "shards").iterdir() if (v2 / "shards" / p.name).exists()
              and os.stat(p).st_ino == os.stat(v2 / "shards" / p.name).st_ino]  # fmt: skip
    assert shared  # the new layout shares the legacy version's unchanged shards: same paths
    env = {**os.environ, "PYTHONPATH": str(Path(curate.__file__).parent.parent)}
    out = subprocess.run([sys.executable, "-m", "curate.cli", "gc", str(v1.parent),
                          "--purge-forgotten"], env=env, capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "t/v1: rewritten" in out.stdout
    assert verify(v1) == [] and verify(v2) == []
    assert (v1 / "state.json").is_file() and not (v1 / "dataset_dict.json").exists()
    m = json.loads((v1 / "manifest.json").read_text())
    assert m.get("layout") is None and m["forgotten"]["purged"] > 0
    disk = datasets.load_from_disk(str(v1))
    assert isinstance(disk, datasets.Dataset)
    assert disk.num_rows == sum(s["rows"] for s in m["shards"])
    assert not [p for p in v1.rglob("*") if p.is_file() and NAME.encode() in p.read_bytes()]

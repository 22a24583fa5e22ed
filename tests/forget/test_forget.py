"""`curate forget` (curate.forget): a new version without the forgotten documents, equal to a
rebuild that excludes them after deduplication, published under the fingerprint the next
run computes, and kept out of later runs. Real runs: normalize, MinHash, packed tokenize."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from conftest import REPO

import curate
from curate.errors import CurateError
from curate.forget_command import Selection, forget
from curate.store import Store

TOKENIZER = str(REPO / "sample_data" / "tokenizer")
NAME = "Zelda Quimby"


def text_of(i: int) -> str:
    return f"Note {i} reads " + " ".join(f"w{(i * 13 + k) % 89}" for k in range(14 + i % 7))


def corpus(folder: Path) -> None:
    """Two inputs; the name in d5 (a cluster's kept document: d25 is its near copy, removed
    as its duplicate), d33 and d61."""
    lines = []
    for i in range(80):
        text = text_of(i)
        if i == 5:
            text = text_of(5) + f" signed {NAME}"
        if i == 25:
            text = text_of(5) + " signed"  # d5's near duplicate, without the name
        if i in (33, 61):
            text = f"Ask {NAME} about note {i}: " + text_of(i)
        lines.append(json.dumps({"text": text}))
    (folder / "data").mkdir(parents=True, exist_ok=True)
    (folder / "data" / "a.jsonl").write_text("\n".join(lines[:45]) + "\n")
    (folder / "data" / "b.jsonl").write_text("\n".join(lines[45:]) + "\n")


def recipe_in(folder: Path, **output: object) -> Path:
    recipe = {
        "name": "t",
        "inputs": ["data/*.jsonl"],
        "partition_size": 1500,  # several partitions per input
        "output": {"root": "out", "fsync": False, "shard_size": 4000, **output},
        "engine": {"workers": 1},
        "stages": [
            {"normalize": {}},
            {"minhash_dedup": {"threshold": 0.7}},
            {"tokenize": {"source": TOKENIZER, "pack": {"seq_len": 32}}},
        ],
    }
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


def shard_sums(version: curate.Version) -> list[tuple[str, str]]:
    return [(s["path"], s["sha256"]) for s in version.manifest["shards"]]


def ids_in(version: curate.Version) -> set[str]:
    out: set[str] = set()
    for s in version.manifest["shards"]:
        with pa.memory_map(str(version.path / s["path"])) as f:
            table = pa.ipc.open_stream(f).read_all()
        for row in table.column("doc_ids").to_pylist():
            out.update(row)
    return out


def holding(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


@pytest.fixture(scope="module")
def forgotten(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    folder = tmp_path_factory.mktemp("forget")
    corpus(folder)
    recipe = recipe_in(folder)
    before = curate.run(recipe)
    done = forget(recipe, Selection(match=__import__("re").compile(NAME)), "request 17")
    return {"folder": folder, "recipe": recipe, "before": before, "done": done}


def test_forgotten_documents_leave_and_no_duplicate_takes_their_place(forgotten: dict) -> None:
    before, done = forgotten["before"], forgotten["done"]
    after = done.version
    assert done.found == 3 and done.added == 3
    gone = ids_in(before) - ids_in(after)
    assert len(gone) == 3  # the three documents with the name, d25 never came back
    assert ids_in(after) <= ids_in(before)
    assert after.manifest["counts"]["removed"]["forget"] == {"forgotten": 3}
    record = after.manifest["forgotten"]
    assert record["documents"] == 3 and record["dropped"] == 3
    assert record["reasons"][0]["reason"] == "request 17"
    assert after.name != before.name


def test_unaffected_shards_are_hard_links_and_tokens_come_from_the_cache(forgotten: dict) -> None:
    before, after = forgotten["before"], forgotten["done"].version
    old = dict(shard_sums(before))
    same = [p for p, h in shard_sums(after) if old.get(p) == h]
    changed = [p for p, h in shard_sums(after) if old.get(p) != h]
    assert same and changed
    for p in same:
        assert os.stat(after.path / p).st_ino == os.stat(before.path / p).st_ino
    tokenize = after.manifest["stages"][2]["cache"]
    assert tokenize["ran"] == 0 and tokenize["reused"] > 0  # nothing tokenized again


def test_the_next_run_is_a_no_op(forgotten: dict) -> None:
    again = curate.run(forgotten["recipe"])
    assert again.up_to_date and again.name == forgotten["done"].version.name


def test_equals_a_rebuild_with_the_exclusions(forgotten: dict, tmp_path: Path) -> None:
    """A fresh build (no cache, no earlier version) with the same exclusions gives the same
    shards and lineage; its ids are resolved again from the inputs (moved here)."""
    corpus(tmp_path)
    recipe = recipe_in(tmp_path, cache=False)
    exclusions = forgotten["folder"] / "out" / "t" / ".forget" / "exclusions.json"
    Store(tmp_path / "out", "t").save_own(".forget", "exclusions.json", exclusions.read_text())
    rebuilt = curate.run(recipe)
    after = forgotten["done"].version
    assert shard_sums(rebuilt) == shard_sums(after)
    lineage = [(r["path"], r["sha256"]) for r in after.manifest["lineage"]]
    assert [(r["path"], r["sha256"]) for r in rebuilt.manifest["lineage"]] == lineage


def test_exclusions_hold_no_text_nor_pattern(forgotten: dict) -> None:
    folder = forgotten["folder"] / "out" / "t" / ".forget"
    data = b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())
    assert b"Zelda" not in data and b"Quimby" not in data
    assert NAME.encode() not in json.dumps(forgotten["done"].version.manifest).encode()


def test_later_runs_keep_them_out(forgotten: dict, tmp_path: Path) -> None:
    """Earlier versions and the cache gone (what a purge does), a new input holding a copy of
    a forgotten document and a run: no file under the root holds the name, though the
    inputs still do."""
    folder = tmp_path / "later"
    shutil.copytree(forgotten["folder"], folder, symlinks=True)
    store = folder / "out" / "t"
    latest = curate.run(folder / "recipe.yaml")
    for child in store.iterdir():
        if child.name.startswith("v") and child.name != latest.name:
            shutil.rmtree(child)
    shutil.rmtree(store / ".cache" / "stages", ignore_errors=True)
    lines = [json.dumps({"text": text_of(100 + i)}) for i in range(20)]
    lines.insert(3, json.dumps({"text": f"Ask {NAME} about note 61: " + text_of(61)}))  # d61's
    (folder / "data" / "c.jsonl").write_text("\n".join(lines) + "\n")
    newer = curate.run(folder / "recipe.yaml")
    assert newer.name != latest.name
    assert holding(store, b"Quimby") == []
    forgot = newer.manifest["counts"]["removed"]["forget"]["forgotten"]
    assert (
        forgot + newer.manifest["stages"][1]["docs_in"] - newer.manifest["stages"][1]["docs_out"]
        >= 4
    )  # the copy is forgotten by its text, or removed as d61's duplicate
    assert holding(folder / "data", b"Quimby")


def test_cli_refuses_without_a_selection(forgotten: dict) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-m", "curate.cli", "forget", str(forgotten["recipe"]), "--reason", "x"],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode == 2 and "give one of --ids" in out.stderr


def test_nothing_selected_is_an_error(forgotten: dict) -> None:
    with pytest.raises(CurateError, match="no document"):
        forget(forgotten["recipe"], Selection(ids=frozenset({"nope"})), "x")


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_by_source_and_by_id_and_an_id_outlives_an_edit(tmp_path: Path) -> None:
    """--source takes an input's every document; --ids one; with an id_field the id is a key
    too, so the document stays forgotten when its text is edited and lines move."""
    from conftest import write_jsonl

    def ids(version: curate.Version) -> set[str]:
        out: set[str] = set()
        for s in version.manifest["shards"]:
            with pa.memory_map(str(version.path / s["path"])) as f:
                out.update(pa.ipc.open_stream(f).read_all().column("id").to_pylist())
        return out

    write_jsonl(
        tmp_path / "data" / "a.jsonl", [{"id": f"a{i}", "text": text_of(i)} for i in range(10)]
    )
    write_jsonl(
        tmp_path / "data" / "b.jsonl", [{"id": f"b{i}", "text": text_of(50 + i)} for i in range(10)]
    )
    recipe = {"name": "s", "inputs": ["data/*.jsonl"], "id_field": "id",
              "stages": [{"normalize": {}}], "output": {"root": "out", "fsync": False},
              "engine": {"workers": 1}}  # fmt: skip
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    assert len(ids(curate.run(path))) == 20
    assert ids(forget(path, Selection(source="*b.jsonl"), "source").version) == {
        f"a{i}" for i in range(10)
    }
    (tmp_path / "ids.txt").write_text("a3\n")
    from curate.forget_command import selection

    chosen = selection(tmp_path / "ids.txt", None, None)
    assert "a3" not in ids(forget(path, chosen, "one").version)
    records = [{"id": "new", "text": text_of(99)}]
    records += [
        {"id": f"a{i}", "text": text_of(i) + (" edited" if i == 3 else "")} for i in range(10)
    ]
    write_jsonl(tmp_path / "data" / "a.jsonl", records)
    later = curate.run(path)
    assert ids(later) == {"new"} | {f"a{i}" for i in range(10) if i != 3}

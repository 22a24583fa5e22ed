"""`gc --purge-forgotten` rewrites an earlier version whose shards hold a row per document
(curate.forget.rewrite) instead of removing it: afterwards it holds none of the forgotten
documents anywhere (shards, lineage, rejected, examples, quarantine), every other document
is byte-identical, its lineage still points at the right rows, the files it shared with the
newer version are still shared, and it verifies."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from conftest import REPO
from test_forget import NAME, corpus

import curate
from curate.forget_command import Selection, forget
from curate.verify import verify


def rows(version: Path) -> dict[str, dict[str, object]]:
    manifest = json.loads((version / "manifest.json").read_text())
    out = {}
    for shard in manifest["shards"]:
        with pa.memory_map(str(version / shard["path"])) as f:
            for row in pa.ipc.open_stream(f).read_all().to_pylist():
                out[row["id"]] = row
    return out


def test_an_unpacked_version_is_rewritten_not_removed(tmp_path: Path) -> None:
    corpus(tmp_path)
    with open(tmp_path / "data" / "a.jsonl", "a") as f:
        f.write('{"text": "' + NAME + " left this line unfinished\n")  # quarantined
    recipe = {
        "name": "t",
        "inputs": ["data/*.jsonl"],
        "partition_size": 1500,
        "output": {"root": "out", "fsync": False, "shard_size": 4000},
        "on_error": {"mode": "quarantine", "max_quarantined": 0.5},
        "engine": {"workers": 1},
        "stages": [{"normalize": {}}, {"minhash_dedup": {"threshold": 0.7}}],
    }
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    store = tmp_path / "out" / "t"
    before = rows(curate.run(tmp_path / "recipe.yaml").path)
    done = forget(tmp_path / "recipe.yaml", Selection(match=re.compile(NAME)), "r")
    assert done.version.name == "v2" and done.lines == 1
    v1, v2 = store / "v1", store / "v2"
    shared = [p for p in (v1 / "shards").iterdir()
              if os.stat(p).st_ino == os.stat(v2 / "shards" / p.name).st_ino]  # fmt: skip
    assert shared
    (store / ".staging-purge-v7").mkdir()  # as a purge killed while writing v7 left it
    (store / ".staging-purge-v7" / "manifest.json").write_text("{}")

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "curate.cli", "gc", str(store),
                          "--purge-forgotten"], env=env, capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "t/v1: rewritten without 3 forgotten document(s)" in out.stdout
    assert verify(v1) == [] and not (store / ".staging-purge-v7").exists()
    assert not [p for p in store.rglob("*") if p.is_file() and b"Quimby" in p.read_bytes()]
    after = rows(v1)
    assert set(before) - set(after) == {i for i, r in before.items() if NAME in str(r["text"])}
    assert all(after[i] == before[i] for i in after)
    for p in shared:  # still one file with the newer version's
        assert os.stat(p).st_ino == os.stat(v2 / "shards" / p.name).st_ino
    manifest = json.loads((v1 / "manifest.json").read_text())
    assert manifest["counts"]["removed"]["forget"] == {"forgotten": 3}
    assert manifest["forgotten"]["purged"] == 3
    # the lineage side table still names, for each document, the row that holds it
    with pa.memory_map(str(v1 / "lineage" / "documents.arrow")) as f:
        lineage = pa.ipc.open_file(f).read_all().to_pylist()
    assert len(lineage) == len(after)
    for entry in lineage:
        with pa.memory_map(str(v1 / manifest["shards"][entry["shard"]]["path"])) as f:
            assert pa.ipc.open_stream(f).read_all()["id"][entry["row"]].as_py() == entry["id"]
    assert curate.open(store, "v1").trace(lineage[-1]["id"]) is not None
    where = subprocess.run([sys.executable, "-m", "curate.cli", "forget", str(store), "--where"],
                           env=env, capture_output=True, text=True)  # fmt: skip
    assert [line for line in where.stdout.splitlines() if not line.startswith("input")] == []


def test_a_packed_version_is_packed_again_as_its_recipe_would(tmp_path: Path) -> None:
    """v1 (threshold 0.7) and v2 (0.9, LATEST before forget) both hold the person; after the
    purge each equals a build from scratch of its own recipe with the exclusions, byte for
    byte: the partitions holding them packed again from their token ids, the tail shard
    too, the others' shards kept (hard links)."""
    from test_forget import TOKENIZER, ids_in

    from curate.store import Store

    def recipe_in(folder: Path, threshold: float, cache: bool = True) -> Path:
        recipe = {
            "name": "t",
            "inputs": ["data/*.jsonl"],
            "partition_size": 1500,
            "output": {"root": "out", "fsync": False, "shard_size": 4000, "cache": cache},
            "engine": {"workers": 1},
            "stages": [
                {"normalize": {}},
                {"minhash_dedup": {"threshold": threshold}},
                {"tokenize": {"source": TOKENIZER, "pack": {"seq_len": 32}}},
            ],
        }
        (folder / "recipe.yaml").write_text(yaml.safe_dump(recipe))
        return folder / "recipe.yaml"

    def sums(version: Path) -> list[tuple[str, str]]:
        manifest = json.loads((version / "manifest.json").read_text())
        return [(s["path"], s["sha256"]) for s in [*manifest["shards"], *manifest["lineage"]]]

    corpus(tmp_path)
    store = tmp_path / "out" / "t"
    curate.run(recipe_in(tmp_path, 0.7)).release()
    curate.run(recipe_in(tmp_path, 0.9)).release()
    done = forget(tmp_path / "recipe.yaml", Selection(match=re.compile(NAME)), "r")
    assert done.version.name == "v3"
    untouched = {p.name: os.stat(p).st_ino for p in (store / "v1" / "shards").iterdir()}
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "curate.cli", "gc", str(store),
                          "--purge-forgotten"], env=env, capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "t/v1: rewritten" in out.stdout and "t/v2: rewritten" in out.stdout
    exclusions = (store / ".forget" / "exclusions.json").read_text()
    gone = {i for entry in json.loads(exclusions)["resolved"].values() for i in entry["ids"]}
    assert len(gone) == 3
    for name, threshold in (("v1", 0.7), ("v2", 0.9)):
        assert verify(store / name) == []
        fresh = tmp_path / f"fresh-{name}"
        corpus(fresh)
        Store(fresh / "out", "t").save_own(".forget", "exclusions.json", exclusions)
        rebuilt = curate.run(recipe_in(fresh, threshold, cache=False))
        assert sums(store / name) == sums(rebuilt.path), name
        assert not ids_in(curate.open(store, name)) & gone
    kept = [n for n, ino in untouched.items() if os.stat(store / "v1" / "shards" / n).st_ino == ino]
    assert kept and len(kept) < len(untouched)  # the partitions without them: not rewritten


def test_packed_splits_are_packed_again_split_by_split(tmp_path: Path) -> None:
    """With a validation split and small shards (several per partition), the rewritten v1
    is the version forget published from the same inputs, splits record included."""
    from test_forget import TOKENIZER

    corpus(tmp_path)
    recipe = {
        "name": "t",
        "inputs": ["data/*.jsonl"],
        "partition_size": 1500,
        "split": {"validation": 0.2},
        "output": {"root": "out", "fsync": False, "shard_size": 700},
        "engine": {"workers": 1},
        "stages": [
            {"normalize": {}},
            {"minhash_dedup": {"threshold": 0.7}},
            {"tokenize": {"source": TOKENIZER, "pack": {"seq_len": 16}}},
        ],
    }
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    store = tmp_path / "out" / "t"
    curate.run(tmp_path / "recipe.yaml").release()
    forget(tmp_path / "recipe.yaml", Selection(match=re.compile(NAME)), "r")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "curate.cli", "gc", str(store),
                          "--purge-forgotten"], env=env, capture_output=True, text=True)  # fmt: skip
    assert "t/v1: rewritten without 3" in out.stdout, out.stdout + out.stderr
    assert verify(store / "v1") == []
    one, two = (json.loads((store / v / "manifest.json").read_text()) for v in ("v1", "v2"))
    assert one["splits"] == two["splits"] and one["packing"] == two["packing"]
    assert [(s["path"], s["sha256"]) for s in one["shards"]] == [
        (s["path"], s["sha256"]) for s in two["shards"]
    ]
    assert len({s["path"].split("/")[0] for s in one["shards"]}) == 2  # train/, validation/


def test_merged_shards_get_the_new_rows_in_place(tmp_path: Path) -> None:
    """With the default shard size, small partitions' rows are merged into `group-*` shards
    at publish; the rewrite finds each partition's rows by their ids and replaces those of
    the affected ones in place: v1 becomes the version forget published."""
    from test_forget import TOKENIZER

    corpus(tmp_path)
    recipe = {
        "name": "t",
        "inputs": ["data/*.jsonl"],
        "partition_size": 1500,
        "output": {"root": "out", "fsync": False},
        "engine": {"workers": 1},
        "stages": [
            {"normalize": {}},
            {"minhash_dedup": {"threshold": 0.7}},
            {"tokenize": {"source": TOKENIZER, "pack": {"seq_len": 16}}},
        ],
    }
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    store = tmp_path / "out" / "t"
    before = curate.run(tmp_path / "recipe.yaml")
    assert any("/group-" in s["path"] for s in before.manifest["shards"])
    before.release()
    forget(tmp_path / "recipe.yaml", Selection(match=re.compile(NAME)), "r")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "curate.cli", "gc", str(store),
                          "--purge-forgotten"], env=env, capture_output=True, text=True)  # fmt: skip
    assert "t/v1: rewritten without 3" in out.stdout, out.stdout + out.stderr
    assert verify(store / "v1") == []
    assert not [p for p in store.rglob("*") if p.is_file() and b"Quimby" in p.read_bytes()]
    one, two = (json.loads((store / v / "manifest.json").read_text()) for v in ("v1", "v2"))
    assert [(s["path"], s["sha256"]) for s in one["shards"]] == [
        (s["path"], s["sha256"]) for s in two["shards"]
    ]


@pytest.mark.parametrize("partition_size", ["1MB", "30KB"])
def test_packed_conversations_are_packed_again(tmp_path: Path, partition_size: str) -> None:
    """Fine-tuning rows (whole conversations, `cu_seqlens`, labels) with a validation split:
    the rewritten v1 is the version forget published, byte for byte. A conversation wholly in
    a tail shard is placed by its input when that is one partition (1MB), else by its line's
    offset, which the chat reader keeps in the lineage (30KB: 4 and 3 partitions)."""
    sys.path.insert(0, str(REPO / "tests" / "chat"))
    from chat_fixtures import conversations
    from conftest import write_jsonl

    convs = conversations(160, seed=4)
    for i in (5, 70, 140):
        convs[i] = [{"role": "user", "content": f"Please write to {NAME} about case {i}."},
                    {"role": "assistant", "content": "Done."}]  # fmt: skip
    records = [{"id": f"c{i:03d}", "messages": m} for i, m in enumerate(convs)]
    write_jsonl(tmp_path / "data" / "a.jsonl", records[:100])
    write_jsonl(tmp_path / "data" / "b.jsonl", records[100:])
    tokenizer = REPO / "sample_data" / "chat" / "tokenizer"
    recipe = {
        "name": "sft",
        "inputs": ["data/*.jsonl"],
        "id_field": "id",
        "chat": {"shape": "messages"},
        "partition_size": partition_size,
        "stages": [{"chat_template": {"source": str(tokenizer), "pack": {"seq_len": 1024}}}],
        "split": {"validation": 0.2},
        "output": {"root": "out", "fsync": False, "shard_size": "8KB"},
        "engine": {"workers": 1},
    }
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    store = tmp_path / "out" / "sft"
    curate.run(tmp_path / "recipe.yaml").release()
    done = forget(tmp_path / "recipe.yaml", Selection(match=re.compile(NAME)), "r")
    assert done.found == 3
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "curate.cli", "gc", str(store),
                          "--purge-forgotten"], env=env, capture_output=True, text=True)  # fmt: skip
    assert "sft/v1: rewritten without 3" in out.stdout, out.stdout + out.stderr
    assert verify(store / "v1") == []
    one, two = (json.loads((store / v / "manifest.json").read_text()) for v in ("v1", "v2"))
    assert one["packing"]["kind"] == "conversations" and one["packing"] == two["packing"]
    assert [(s["path"], s["sha256"]) for s in one["shards"]] == [
        (s["path"], s["sha256"]) for s in two["shards"]
    ]

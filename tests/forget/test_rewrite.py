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

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "curate.cli", "gc", str(store),
                          "--purge-forgotten"], env=env, capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "t/v1: rewritten without 3 forgotten document(s)" in out.stdout
    assert verify(v1) == []
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

"""Rows handed to the next pass without writing them again (`curate.engines.staged_rows`).

A pass with no map stage stages nothing: the next pass reads its source again and drops
the same ids. A pass the stage cache replays whole stages nothing either: the last entry
holds the rows. Both must give the next pass the very batches a written copy would, so
the version is byte-identical to a build from scratch, also when the run is interrupted
between passes and resumed, and an entry gone missing in between is reported and
recomputed by the next run, never replaced by something else.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from conftest import REPO, corpus, write_jsonl

RECIPE: dict[str, Any] = {
    "name": "t",
    "inputs": ["data/*.jsonl"],
    "id_field": "id",
    "partition_size": "8KB",
    "batch_size": "3KB",
    "stages": [
        {"normalize": {}},
        {"exact_dedup": {}},
        {"minhash_dedup": {"threshold": 0.7}},
        {"filter_length": {"min_words": 6}},
    ],
    "output": {"root": "out", "fsync": False, "shard_size": "8KB"},
    "engine": {"workers": 1},
}


def setup(folder: Path, min_words: int = 6, cache: bool = True, root: str = "out") -> Path:
    data = json.loads(json.dumps(RECIPE))
    data["stages"][3]["filter_length"]["min_words"] = min_words
    data["output"]["root"] = root
    if not cache:
        data["output"]["cache"] = False
    if not (folder / "data").exists():
        docs = corpus(600, dup_every=4)
        write_jsonl(folder / "data" / "a.jsonl", docs[:350])
        write_jsonl(folder / "data" / "b.jsonl", docs[350:])
    path = folder / f"{root}-{min_words}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run(recipe: Path, kill_at: str | None = None) -> int:
    env = {**os.environ, "CURATE_PHASE_LOG": str(recipe.parent / "phases.log")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    if kill_at:
        env["CURATE_KILL_AT"] = kill_at
    (recipe.parent / "phases.log").unlink(missing_ok=True)
    proc = subprocess.run(
        [sys.executable, "-m", "curate.cli", "run", str(recipe), "--quiet"], cwd=recipe.parent,
        env=env, capture_output=True, start_new_session=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode in (0, 2, -signal.SIGKILL), proc.stderr.decode()
    if proc.returncode == 2:  # the user's error, in one line
        raise RuntimeError(proc.stderr.decode())
    return proc.returncode


def published(dataset: Path) -> dict[str, Any]:
    latest = (dataset / "LATEST").read_text().strip()
    m = json.loads((dataset / latest / "manifest.json").read_text())
    files = {key: [f["sha256"] for f in m[key]] for key in ("shards", "rejected", "quarantine")}
    return files | {"counts": m["counts"], "fingerprint": m["fingerprint"]}


def records(dataset: Path, k: int) -> list[dict[str, Any]]:
    (staging,) = dataset.glob(".staging-*")
    return [json.loads(p.read_text()) for p in sorted((staging / f"pass-{k}").glob("part-*.json"))]


def staged_data(dataset: Path, k: int) -> list[Path]:
    (staging,) = dataset.glob(".staging-*")
    return sorted((staging / f"pass-{k}").glob("data-*.arrow"))


def test_a_pass_without_map_stages_stages_no_rows(tmp_path: Path) -> None:
    reference = setup(tmp_path, cache=False, root="scratch")
    assert run(reference) == 0
    expected = published(tmp_path / "scratch" / "t")

    recipe = setup(tmp_path, cache=False)
    assert run(recipe, kill_at="publish:1") == -signal.SIGKILL  # staging kept as it was
    dataset = tmp_path / "out" / "t"
    assert staged_data(dataset, 0)  # normalize ran: its rows are written
    assert not staged_data(dataset, 1)  # exact_dedup's decision applied, nothing else
    one = records(dataset, 1)
    assert one and all(r["rows_from"] == {"source": True} for r in one)
    assert all("data" not in seg for r in one for seg in r["files"]["segments"])
    assert run(recipe) == 0
    assert published(dataset) == expected


def test_a_pass_replayed_from_the_cache_stages_no_rows_and_resumes(tmp_path: Path) -> None:
    assert run(setup(tmp_path, 8, cache=False, root="scratch")) == 0
    expected = published(tmp_path / "scratch" / "t")
    assert run(setup(tmp_path, 6)) == 0  # fills the cache
    changed = setup(tmp_path, 8)  # only the last stage differs: passes 0 and 1 replay
    assert run(changed, kill_at="publish:1") == -signal.SIGKILL
    dataset = tmp_path / "out" / "t"
    assert not staged_data(dataset, 0) and not staged_data(dataset, 1)
    zero = records(dataset, 0)
    assert zero and all("entry" in r["rows_from"] for r in zero)
    assert run(changed) == 0
    assert published(dataset) == expected


def test_an_entry_lost_between_passes_is_reported_then_recomputed(tmp_path: Path) -> None:
    assert run(setup(tmp_path, 8, cache=False, root="scratch")) == 0
    expected = published(tmp_path / "scratch" / "t")
    assert run(setup(tmp_path, 6)) == 0
    changed = setup(tmp_path, 8)
    assert run(changed, kill_at="reading:1") == -signal.SIGKILL  # in pass 1 (0 replayed)
    dataset = tmp_path / "out" / "t"
    zero = records(dataset, 0)
    assert zero and all("entry" in r["rows_from"] for r in zero)
    lost = zero[0]["rows_from"]["entry"]
    (entry,) = (dataset / ".cache" / "stages").glob(f"*/{lost}")
    (entry / "rows.arrow").chmod(0o600)
    with open(entry / "rows.arrow", "r+b") as f:  # one flipped byte: damaged, never trusted
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0xFF]))
    try:
        run(changed)
        raised = ""
    except RuntimeError as exc:
        raised = str(exc)
    assert "were kept in a stage cache entry that is now gone or damaged" in raised
    assert run(changed) == 0
    assert published(dataset) == expected

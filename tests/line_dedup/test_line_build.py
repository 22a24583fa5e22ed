"""line_dedup in a build: the published text is what a plain Python version gives, a
barrier after it sees the changed text, the stage cache replays it (and never serves a
later barrier rows made under another decision), and a killed run resumes identically."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from conftest import write_jsonl
from line_pages import pages
from line_reference import line_dedup

import curate


def make_data(folder: Path, n: int = 400) -> list[dict[str, Any]]:
    docs = pages(n)
    # equal once their boilerplate goes ("ok!" is shorter than min_chars 5: it stays)
    docs[50] = {"id": "p50", "text": "Home | Products | About us | Contact\nok!"}
    docs[60] = {"id": "p60", "text": "Skip to main content\nok!\nTerms of use | Privacy"}
    write_jsonl(folder / "data" / "a.jsonl", docs[: n // 2])
    write_jsonl(folder / "data" / "b.jsonl", docs[n // 2 :])
    return docs


def recipe_dict(stages: list[dict[str, Any]], root: str = "out") -> dict[str, Any]:
    return {
        "name": "t",
        "inputs": ["data/a.jsonl", "data/b.jsonl"],
        "id_field": "id",
        "partition_size": "8KB",
        "batch_size": "2KB",
        "stages": stages,
        "output": {"root": root, "fsync": False, "shard_size": "8KB"},
        "engine": {"workers": 1},
    }


def write(folder: Path, recipe: dict[str, Any]) -> Path:
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


def build(folder: Path, recipe: dict[str, Any]) -> curate.Version:
    return curate.run(write(folder, recipe))


def files(version: Path) -> dict[str, str]:
    return {
        str(p.relative_to(version)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(version.rglob("*"))
        if p.is_file() and p.name not in ("manifest.json", "README.md")
    }


def first_of_each_text(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[str] = set()
    out = []
    for d in docs:
        if d["text"] not in seen:
            seen.add(d["text"])
            out.append(d)
    return out


def test_the_published_text_is_plain_pythons_and_the_next_barrier_sees_it(
    tmp_path: Path,
) -> None:
    docs = make_data(tmp_path)
    # two barriers in a row: the second's pass has no map stage, and must still stage the
    # changed rows rather than "the rows read, less the drops"
    stages = [{"line_dedup": {"min_chars": 5}}, {"exact_dedup": {}}]
    version = build(tmp_path, recipe_dict(stages))
    kept, dropped = line_dedup(docs, min_chars=5)
    expected = first_of_each_text(kept)
    assert len(expected) < len(kept)  # p50 and p60 became equal
    table = version.to_arrow()
    assert table.column("id").to_pylist() == [d["id"] for d in expected]
    assert table.column("text").to_pylist() == [d["text"] for d in expected]
    stage = version.manifest["stages"][0]
    assert stage["removed"] == {"all_repeated": len(dropped)}
    assert stage["changed"] == sum(
        1 for d, o in zip(kept, [x for x in docs if x["id"] not in dropped], strict=True)
        if d["text"] != o["text"]
    )  # fmt: skip
    counters = stage["counters"]
    assert counters["lines_removed"] > 0
    before = sum(len(d["text"]) for d in docs)
    assert counters["chars_removed"] == before - sum(len(d["text"]) for d in kept)
    assert stage["details"]["decision"]["changed"] == stage["changed"]
    rejected = version.rejected()
    assert sorted(rejected.filter(
        rejected.column("stage").to_numpy(zero_copy_only=False) == "line_dedup"
    ).column("id").to_pylist()) == sorted(dropped)  # fmt: skip
    stats = json.loads((version.path / "statistics.json").read_text())
    assert "line_dedup" in json.dumps(stats) and "lines_removed" in json.dumps(stats)


def test_the_stage_cache_replays_it_and_keeps_later_barriers_honest(tmp_path: Path) -> None:
    make_data(tmp_path)
    stages = [{"line_dedup": {}}, {"exact_dedup": {}}, {"filter_length": {"min_words": 3}}]
    first = build(tmp_path, recipe_dict(copy.deepcopy(stages)))
    later = copy.deepcopy(stages)
    later[2]["filter_length"]["min_words"] = 4  # after both barriers: decisions reused
    second = build(tmp_path, recipe_dict(later))
    for i in (0, 1):
        assert second.manifest["stages"][i]["details"]["decision"]["reused_from"] == first.name
    scratch = build(tmp_path, recipe_dict(later, root="scratch-1"))
    assert files(second.path) == files(scratch.path)
    assert second.manifest["stages"][0]["counters"] == scratch.manifest["stages"][0]["counters"]
    # line_dedup changed: exact_dedup's digests were taken of texts under the old decision,
    # so none of them may serve the new one, although the documents are the same
    changed = copy.deepcopy(stages)
    changed[0]["line_dedup"]["max_documents"] = 1000  # nothing repeated enough: p50 != p60
    third = build(tmp_path, recipe_dict(changed))
    assert third.manifest["stages"][0]["cache"]["docs_reused"] == 400  # the hashes, kept
    scratch = build(tmp_path, recipe_dict(changed, root="scratch-2"))
    assert files(third.path) == files(scratch.path)
    assert third.manifest["counts"] == scratch.manifest["counts"]


def run_cli(recipe: Path, log: Path, kill_at: str | None = None) -> int:
    env = {**os.environ, "CURATE_PHASE_LOG": str(log)}
    if kill_at:
        env["CURATE_KILL_AT"] = kill_at
    proc = subprocess.run(
        [sys.executable, "-m", "curate.cli", "run", str(recipe), "--quiet"],
        env=env, capture_output=True, timeout=300, start_new_session=True,
    )  # fmt: skip
    assert proc.returncode in (0, -signal.SIGKILL), proc.stderr.decode()
    return proc.returncode


def published(root: Path) -> dict[str, Any]:
    latest = (root / "LATEST").read_text().strip()
    m = json.loads((root / latest / "manifest.json").read_text())
    keys = ("shards", "rejected", "quarantine")
    return {k: [f["sha256"] for f in m[k]] for k in keys} | {"counts": m["counts"]}


def test_a_run_killed_around_its_decision_resumes_identically(tmp_path: Path) -> None:
    make_data(tmp_path, 300)
    stages = [{"filter_length": {"min_words": 1}}, {"line_dedup": {"unit": "paragraph"}},
              {"line_dedup": {}}]  # fmt: skip
    recipe = write(tmp_path, recipe_dict(stages))
    assert run_cli(recipe, tmp_path / "full.log") == 0
    root = tmp_path / "out" / "t"
    reference = published(root)
    # decide:1/2: the first decision's summaries read, then its files written; barrier:40 and
    # shard_write:3: while the second pass applies it, and while the last writes shards
    for at in ("decide:1", "decide:2", "decide:4", "barrier:40", "shard_write:3"):
        for p in [root, *root.rglob("*")] if root.exists() else []:
            if not p.is_symlink():
                p.chmod(0o755 if p.is_dir() else 0o644)
        subprocess.run(["rm", "-rf", str(tmp_path / "out")], check=True)
        assert run_cli(recipe, tmp_path / f"{at}.log", kill_at=at) == -signal.SIGKILL, at
        assert run_cli(recipe, tmp_path / f"{at}-resume.log") == 0
        assert published(root) == reference, at

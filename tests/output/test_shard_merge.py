"""Small partitions' shards merge at publish, in groups that one change cannot move
(curate.output.shard_merge): appending a file or removing a document leaves every other
group's shard names and bytes as they were."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from conftest import corpus, write_jsonl, write_recipe

import curate
from curate.output.shard_merge import MERGES
from curate.verify import verify

FILES = 60


def _build(tmp_path: Path, root: str, workers: int = 1) -> curate.Version:
    recipe = write_recipe(
        tmp_path,
        stages=[{"normalize": {}}],
        output={"root": root, "fsync": False, "shard_size": "64KB"},
        engine={"workers": workers},
    )
    return curate.run(recipe)


def _files(tmp_path: Path, n: int = FILES) -> list[list[dict]]:
    docs = corpus(n * 20)
    chunks = [docs[i * 20 : (i + 1) * 20] for i in range(n)]
    for i, chunk in enumerate(chunks):
        write_jsonl(tmp_path / "data" / f"f{i:03d}.jsonl", chunk)
    return chunks


def _shards(version: curate.Version) -> dict[str, str]:
    return {s["path"]: s["sha256"] for s in version.manifest["shards"]}


def _texts(version: curate.Version) -> list[str]:
    tables = [pa.ipc.open_stream(version.path / s).read_all() for s in _shards(version)]
    return [t for table in tables for t in table.column("text").to_pylist()]


def test_small_files_publish_as_fewer_shards_with_every_document_in_order(tmp_path: Path) -> None:
    chunks = _files(tmp_path)
    version = _build(tmp_path, "out")
    shards = version.manifest["shards"]
    assert len(shards) < FILES / 3, "tiny partitions merged"
    assert any(Path(s["path"]).name.startswith("group-") for s in shards)
    assert _texts(version) == [d["text"] for chunk in chunks for d in chunk]
    assert sum(s["rows"] for s in shards) == version.manifest["counts"]["written"]
    on_disk = sorted(p.name for p in (version.path / "shards").iterdir())
    assert on_disk == sorted(Path(s["path"]).name for s in shards), "members were deleted"
    assert not (version.path / MERGES).exists()
    assert verify(version.path) == []
    assert curate.open(version.path).to_dataset()["text"] == _texts(version)


def test_appending_a_file_keeps_every_other_groups_shards(tmp_path: Path) -> None:
    _files(tmp_path)
    before = _shards(_build(tmp_path, "out"))
    write_jsonl(tmp_path / "data" / "f999.jsonl", corpus(20, prefix="new"))
    after = _shards(_build(tmp_path, "out"))
    changed = set(before.items()) - set(after.items())
    assert len(changed) <= 1, f"only the last group may change, not {sorted(changed)}"
    if changed:
        (last,) = changed
        assert last[0] == list(before)[-1]


def test_removing_a_document_changes_only_its_group(tmp_path: Path) -> None:
    chunks = _files(tmp_path)
    before = _build(tmp_path, "out")
    middle = FILES // 2
    write_jsonl(tmp_path / "data" / f"f{middle:03d}.jsonl", chunks[middle][1:])
    after = _build(tmp_path, "out")
    changed = set(_shards(before).items()) ^ set(_shards(after).items())
    assert 1 <= len(changed) <= 2, "one shard changes: the one holding that file's documents"
    assert {path for path, _ in changed} <= set(_shards(before)) | set(_shards(after))
    assert len({path for path, _ in changed}) == 1


def test_one_and_two_workers_merge_alike(tmp_path: Path) -> None:
    _files(tmp_path)
    assert _shards(_build(tmp_path, "one", 1)) == _shards(_build(tmp_path, "two", 2))


def test_a_merge_killed_at_any_point_resumes_to_the_same_version(tmp_path: Path) -> None:
    """SIGKILL before each group shard is written, after `merges.json` is recorded and
    between the members' deletions (`CURATE_KILL_AT=merge:n`, as tests/test_crash_resume.py
    kills runs): the next run publishes the same shards."""
    _files(tmp_path)
    recipe = write_recipe(
        tmp_path,
        stages=[{"normalize": {}}],
        output={"root": "out", "fsync": False, "shard_size": "64KB"},
    )
    log = tmp_path / "full.log"
    assert _cli(recipe, log) == 0
    want = _published(tmp_path / "out" / "t")
    merges = [line for line in log.read_text().splitlines() if line.startswith("merge ")]
    assert len(merges) >= 3
    for n in range(1, len(merges) + 1):
        shutil.rmtree(tmp_path / "out")
        kill_log = tmp_path / f"kill-{n}.log"
        assert _cli(recipe, kill_log, kill_at=f"merge:{n}") == -signal.SIGKILL
        assert not (tmp_path / "out" / "t" / "LATEST").exists()
        assert _cli(recipe, tmp_path / f"resume-{n}.log") == 0
        assert _published(tmp_path / "out" / "t") == want, n


def _cli(recipe: Path, log: Path, kill_at: str | None = None) -> int:
    env = {**os.environ, "CURATE_PHASE_LOG": str(log)}
    if kill_at:
        env["CURATE_KILL_AT"] = kill_at
    done = subprocess.run(
        [sys.executable, "-m", "curate.cli", "run", str(recipe), "--quiet"],
        env=env, capture_output=True, start_new_session=True, timeout=300,
    )  # fmt: skip
    assert done.returncode in (0, -signal.SIGKILL), done.stderr.decode()
    return done.returncode


def _published(root: Path) -> list[tuple[str, str]]:
    latest = (root / "LATEST").read_text().strip()
    manifest = json.loads((root / latest / "manifest.json").read_text())
    assert not list(root.glob(".staging-*"))
    return [(s["path"], s["sha256"]) for s in manifest["shards"]]


def test_rejected_and_quarantine_files_merge_too(tmp_path: Path) -> None:
    """Thousands of partitions would otherwise leave a rejected and a quarantine file each."""
    chunks = _files(tmp_path)
    for i in range(0, FILES, 3):  # a malformed line in every third file
        path = tmp_path / "data" / f"f{i:03d}.jsonl"
        path.write_text(path.read_text() + "{not json\n")
    recipe = write_recipe(
        tmp_path,
        stages=[{"normalize": {}}, {"exact_dedup": {}}],
        output={"root": "out", "fsync": False, "shard_size": "64KB"},
    )
    version = curate.run(recipe)
    m = version.manifest
    removed = sum(m["counts"]["removed"]["1:exact_dedup"].values())
    assert removed > FILES and m["counts"]["quarantined"] == FILES // 3
    for kind, rows in (("rejected", removed), ("quarantine", FILES // 3)):
        files = m[kind]
        assert 1 <= len(files) < FILES / 6, f"{kind}: {len(files)} files for {FILES} partitions"
        assert sum(f["rows"] for f in files) == rows
        on_disk = sorted(p.name for p in (version.path / kind).iterdir())
        assert on_disk == sorted(Path(f["path"]).name for f in files)
    assert verify(version.path) == []
    ids = [
        i
        for f in m["rejected"]
        for i in pa.ipc.open_stream(version.path / f["path"]).read_all().column("id").to_pylist()
    ]
    assert len(ids) == len(set(ids)) == removed
    assert set(ids) < {d["id"] for chunk in chunks for d in chunk}


def test_groups_are_written_side_by_side_and_publish_the_same_shards(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two merged shards are written at once (each waits for the other at a barrier: one
    after the other, the first would wait alone and fail), and the version is the one
    written one group at a time."""
    from curate.output import shard_merge

    _files(tmp_path)
    real = shard_merge._write
    meet = threading.Barrier(2, timeout=30)
    calls: list[str] = []

    def together(root: Path, target: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(target)
        if len(calls) <= 2:
            meet.wait()
        return real(root, target, *args, **kwargs)

    monkeypatch.setattr(shard_merge, "_write", together)
    side_by_side = _build(tmp_path, "out")
    assert len([c for c in calls if "/group-" in c or c.startswith("group-")]) >= 2
    monkeypatch.setattr(shard_merge, "_write", real)
    monkeypatch.setattr(shard_merge, "MERGE_THREADS", 1)
    one_by_one = _build(tmp_path, "again")
    assert side_by_side.manifest["shards"] == one_by_one.manifest["shards"]
    assert _texts(side_by_side) == _texts(one_by_one)

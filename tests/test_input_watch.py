"""An input that changes under a run fails the run, and nothing is published.

An input truncated while a run read it used to give a version with a third of the
records, exit 0, a manifest claiming the full file's size and hash, and `verify` OK; with
`input_identity: content`, restoring the file then made the short version "up to date"
for good. Each test changes an input while a real `curate run` (a subprocess) is paused
at a chosen moment (`CURATE_PAUSE_AT`, curate/phases.py), then checks the exit status,
the one-line message, that no version was added, and that a run after the input is
restored publishes every record.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import corpus, write_jsonl, write_recipe

from curate.verify import verify

N = 3000


def start(recipe: Path, log: Path, env_extra: dict[str, str]) -> subprocess.Popen[str]:
    env = {**os.environ, "CURATE_PHASE_LOG": str(log), **env_extra}
    return subprocess.Popen(
        [sys.executable, "-m", "curate.cli", "run", str(recipe), "--quiet"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, cwd=recipe.parent,  # messages show paths from here
    )  # fmt: skip


def run_changing(
    recipe: Path, log: Path, pause_at: str, change: Callable[[], None]
) -> tuple[int, str]:
    """Run, pause at `pause_at`, change the input, let the run go on: (exit status, stderr)."""
    proc = start(recipe, log, {"CURATE_PAUSE_AT": pause_at})
    paused = Path(f"{log}.paused")
    deadline = time.monotonic() + 120
    while not paused.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            _, err = proc.communicate()
            pytest.fail(f"the run never paused at {pause_at}: {proc.returncode} {err}")
        time.sleep(0.01)
    change()
    paused.unlink()
    _, err = proc.communicate(timeout=300)
    return proc.returncode, err


def run(recipe: Path, log: Path) -> str:
    proc = start(recipe, log, {})
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return err


def project(
    tmp_path: Path, identity: str, partition_size: str = "1GB", cache: bool = True
) -> tuple[Path, Path]:
    docs = corpus(N, dup_every=0)
    data = write_jsonl(tmp_path / "data" / "a.jsonl", docs)
    recipe = write_recipe(
        tmp_path,
        stages=[{"normalize": {}}],
        input_identity=identity,
        partition_size=partition_size,
        batch_size="4KB",
        output={"root": "out", "fsync": False, "cache": cache},
    )
    return recipe, data


def dataset(tmp_path: Path) -> Path:
    return tmp_path / "out" / "t"


def latest(tmp_path: Path) -> str | None:
    path = dataset(tmp_path) / "LATEST"
    return path.read_text().strip() if path.exists() else None


def versions(tmp_path: Path) -> list[str]:
    root = dataset(tmp_path)
    return sorted(p.name for p in root.glob("v*")) if root.exists() else []


def written(tmp_path: Path) -> int:
    name = latest(tmp_path)
    assert name is not None
    m = json.loads((dataset(tmp_path) / name / "manifest.json").read_text())
    assert verify(dataset(tmp_path) / name) == []
    return int(m["counts"]["written"])


def truncate(path: Path) -> Callable[[], None]:
    return lambda: os.truncate(path, path.stat().st_size * 3 // 10)


def append(path: Path) -> Callable[[], None]:
    def go() -> None:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"id": "late", "text": "a record written during the run"}) + "\n")

    return go


def replace(path: Path) -> Callable[[], None]:
    """Another file, with the same bytes, takes the name (a new inode)."""

    def go() -> None:
        other = path.with_name("a.jsonl.new")
        shutil.copyfile(path, other)
        os.replace(other, path)

    return go


CHANGES = {"truncated": truncate, "appended": append, "replaced": replace}


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("identity", "change"),
    [("stat", "truncated"), ("content", "truncated"), ("stat", "appended"),
     ("content", "replaced")],
)  # fmt: skip
def test_an_input_changed_while_it_is_read_fails_the_run(
    tmp_path: Path, identity: str, change: str
) -> None:
    recipe, data = project(tmp_path, identity)
    original = data.read_bytes()
    run(recipe, tmp_path / "first.log")  # v1, then a new record makes the next run build
    assert versions(tmp_path) == ["v1"] and written(tmp_path) == N
    append(data)()
    grown = data.read_bytes()
    size = len(grown)

    code, err = run_changing(recipe, tmp_path / "changed.log", "reading:2", CHANGES[change](data))
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err, (code, err)
    message = errors[0]
    assert "input 'data/a.jsonl' changed while the run read it" in message, message
    assert "nothing was published" in message and "run again once it is stable" in message
    if change == "truncated":
        assert f"(size {size} -> {size * 3 // 10})" in message, message
    assert versions(tmp_path) == ["v1"] and latest(tmp_path) == "v1"
    assert not list(dataset(tmp_path).glob(".staging-*"))

    data.write_bytes(grown)  # restored: the next run reads all of it
    run(recipe, tmp_path / "restored.log")
    assert latest(tmp_path) == "v2" and written(tmp_path) == N + 1
    assert original != grown


@pytest.mark.timeout(300)
@pytest.mark.parametrize("identity", ["stat", "content"])
def test_an_input_changed_after_reading_before_publishing_fails_the_run(
    tmp_path: Path, identity: str
) -> None:
    recipe, data = project(tmp_path, identity)
    size = data.stat().st_size
    code, err = run_changing(recipe, tmp_path / "changed.log", "publish:1", append(data))
    assert code == 2, err
    assert "input 'data/a.jsonl' changed while the run read it (size " in err, err
    assert f"{size} -> " in err and latest(tmp_path) is None and versions(tmp_path) == []
    run(recipe, tmp_path / "again.log")
    assert written(tmp_path) == N + 1


@pytest.mark.timeout(300)
def test_partitions_staged_before_a_change_are_read_again(tmp_path: Path) -> None:
    """A run killed after some partitions, the input then rewritten with the same bytes: with
    `input_identity: content` the fingerprint is the same, but nothing staged from the file
    as it was is reused. (The stage cache is off: its entries are keyed by a digest the new
    run takes of the file as it is now, so replaying them trusts nothing staged;
    tests/cache/test_stage_cache.py covers that.)"""
    recipe, data = project(tmp_path, "content", partition_size="30KB", cache=False)
    full_log = tmp_path / "full.log"
    run(recipe, full_log)
    full_reads = full_log.read_text().count("reading ")
    shutil.rmtree(tmp_path / "out")

    kill_log = tmp_path / "kill.log"
    proc = start(recipe, kill_log, {"CURATE_KILL_AT": f"reading:{full_reads * 2 // 3}"})
    proc.communicate(timeout=300)
    assert proc.returncode != 0 and list(dataset(tmp_path).glob(".staging-*"))
    replace(data)()  # the same bytes, another file
    again = tmp_path / "again.log"
    run(recipe, again)
    assert again.read_text().count("reading ") == full_reads  # every partition read again
    assert written(tmp_path) == N

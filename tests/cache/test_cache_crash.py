"""SIGKILL while the stage cache is read or written, and two runs sharing entries at once.

A killed run leaves no entry visible half-written (entries appear by one rename), and the
next run, which may replay what the killed one kept, publishes the same bytes as a build
from scratch. Two runs of recipes that share a prefix, started together in one dataset
folder, write and read the same entries: both publish what a build from scratch would.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, corpus, write_jsonl

PHASES = ("cache_read", "cache_write", "cache_commit")
TRIALS = 9

BASE: dict[str, Any] = {
    "name": "t",
    "inputs": ["data/*.jsonl"],
    "id_field": "id",
    "partition_size": "8KB",
    "batch_size": "3KB",
    "stages": [
        {"normalize": {}},
        {"filter_length": {"min_words": 6}},
        {"exact_dedup": {}},
        {"filter_length": {"min_words": 7}},
    ],
    "output": {"root": "out", "fsync": False, "shard_size": "8KB"},
    "engine": {"workers": 1},
}


def recipe(folder: Path, name: str, last: int, root: str = "out") -> Path:
    data = json.loads(json.dumps(BASE))
    data["stages"][3]["filter_length"]["min_words"] = last
    data["output"]["root"] = root
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def make_data(folder: Path) -> None:
    docs = corpus(900, dup_every=4)
    write_jsonl(folder / "data" / "a.jsonl", docs[:500])
    write_jsonl(folder / "data" / "b.jsonl", docs[500:])


def curate_run(path: Path, log: Path, kill_at: str | None = None) -> subprocess.Popen[bytes]:
    env = {**os.environ, "CURATE_PHASE_LOG": str(log)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    if kill_at:
        env["CURATE_KILL_AT"] = kill_at
    return subprocess.Popen(
        [sys.executable, "-m", "curate.cli", "run", str(path), "--quiet"], cwd=path.parent,
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip


def finished(proc: subprocess.Popen[bytes]) -> int:
    _, err = proc.communicate(timeout=300)
    assert proc.returncode in (0, -signal.SIGKILL), err.decode()
    return proc.returncode


def published(root: Path) -> dict[str, Any]:
    latest = (root / "LATEST").read_text().strip()
    m = json.loads((root / latest / "manifest.json").read_text())
    files = {key: [f["sha256"] for f in m[key]] for key in ("shards", "rejected", "quarantine")}
    return files | {"counts": m["counts"], "fingerprint": m["fingerprint"]}


def phases(log: Path) -> Counter[str]:
    return (
        Counter(line.split()[0] for line in log.read_text().splitlines())
        if log.exists()
        else Counter()
    )


@pytest.mark.timeout(900)
def test_kills_while_the_cache_is_read_or_written_publish_the_same_bytes(tmp_path: Path) -> None:
    make_data(tmp_path)
    first, second = recipe(tmp_path, "first", 7), recipe(tmp_path, "second", 8)
    assert (
        finished(curate_run(recipe(tmp_path, "scratch", 8, root="scratch"), tmp_path / "s.log"))
        == 0
    )
    reference = published(tmp_path / "scratch" / "t")
    full = tmp_path / "full.log"
    assert finished(curate_run(first, full)) == 0
    assert finished(curate_run(second, full)) == 0
    assert published(tmp_path / "out" / "t") == reference
    counts = phases(full)
    assert all(counts[p] for p in PHASES), counts

    rng = random.Random(20261203)
    hit: Counter[str] = Counter()
    for trial in range(TRIALS):
        shutil.rmtree(tmp_path / "out", ignore_errors=True)
        log = tmp_path / f"trial-{trial}.log"
        phase = PHASES[trial % len(PHASES)]
        # the first run fills the cache (killed too, now and then), the second replays it
        kill_first = trial % 3 == 2
        at = f"{phase}:{rng.randint(1, max(1, counts[phase] // 2))}"
        code = finished(curate_run(first, log, kill_at=at if kill_first else None))
        code2 = finished(curate_run(second, log, kill_at=None if kill_first else at))
        hit[phase] += (code != 0) + (code2 != 0)
        assert finished(curate_run(second, tmp_path / "resume.log")) == 0
        assert published(tmp_path / "out" / "t") == reference, (trial, phase)
        leftovers = list((tmp_path / "out" / "t" / ".cache" / "stages").glob("*/*/meta.json.tmp"))
        assert not leftovers
    assert all(hit[p] for p in PHASES), hit


def test_two_runs_sharing_a_prefix_at_once_share_entries_safely(tmp_path: Path) -> None:
    make_data(tmp_path)
    expected = {}
    for last in (7, 8, 9, 10):
        path = recipe(tmp_path, f"scratch{last}", last, root=f"scratch{last}")
        assert finished(curate_run(path, tmp_path / "s.log")) == 0
        expected[last] = published(tmp_path / f"scratch{last}" / "t")
    for pair in ((7, 8), (9, 10)):  # both write the shared entries, then both replay them
        procs = [curate_run(recipe(tmp_path, f"r{last}", last), tmp_path / f"{last}.log")
                 for last in pair]  # fmt: skip
        assert all(finished(p) == 0 for p in procs)
    versions = [
        json.loads(m.read_text()) for m in (tmp_path / "out" / "t").glob("v*/manifest.json")
    ]
    by_last = {v["recipe"]["stages"][3]["filter_length"]["min_words"]: v for v in versions}
    assert sorted(by_last) == [7, 8, 9, 10]
    for last, got in by_last.items():
        assert [f["sha256"] for f in got["shards"]] == expected[last]["shards"]
        assert got["counts"] == expected[last]["counts"]
    for last in (9, 10):  # the second pair ran no stage of the shared prefix
        assert [s["cache"]["ran"] for s in by_last[last]["stages"][:3]] == [0, 0, 0]


@pytest.mark.parametrize("nth", [1, 2])
def test_a_kill_while_deciding_on_new_inputs_leaves_nothing_and_the_rerun_publishes_the_same(
    tmp_path: Path, nth: int
) -> None:
    """Inputs gained a file whose documents repeat old ones: exact_dedup decides again from
    the cached bases and the new partition's. Killed before deciding (1) or with the decision
    files written but neither cached nor marked done (2), no version appears, and the rerun
    publishes what a build from scratch of the three files does."""
    make_data(tmp_path)
    first = recipe(tmp_path, "first", 7)
    assert finished(curate_run(first, tmp_path / "v1.log")) == 0
    dataset = tmp_path / "out" / "t"
    v1 = published(dataset)
    write_jsonl(tmp_path / "data" / "c.jsonl", corpus(300, dup_every=3, prefix="c"))
    log = tmp_path / "killed.log"
    assert finished(curate_run(first, log, kill_at=f"decide:{nth}")) == -signal.SIGKILL
    assert phases(log)["decide"] == nth and phases(log)["cache_read"]  # replayed, then decided
    assert sorted(p.name for p in dataset.glob("v*")) == ["v1"]
    assert (dataset / "LATEST").read_text().strip() == "v1" and published(dataset) == v1
    assert not list((dataset / ".cache" / "stages").glob("*/*/meta.json.tmp"))
    assert finished(curate_run(first, tmp_path / "rerun.log")) == 0
    scratch = recipe(tmp_path, "scratch", 7, root="scratch")
    assert finished(curate_run(scratch, tmp_path / "s.log")) == 0
    assert (dataset / "LATEST").read_text().strip() == "v2"
    assert published(dataset) == published(tmp_path / "scratch" / "t") != v1


def test_a_partition_resumed_mid_replay_counts_the_documents_it_had_read(tmp_path: Path) -> None:
    """One pass, whose first stages replay from the cache: a partition killed after it wrote
    a shard resumes from its checkpoint, past chunks the cache replays. Their documents were
    read before the kill; the resumed run counts them, or reconciling the counts would refuse
    the version, and every later run of the recipe too (read 62 short in a 2-worker run
    killed between a partition's entries and its record)."""
    make_data(tmp_path)

    def one_pass(name: str, last: int, root: str = "out") -> Path:
        data = json.loads(json.dumps(BASE))
        data["stages"] = [{"normalize": {}}, {"filter_length": {"min_words": last}}]
        data["output"] |= {"root": root, "shard_size": 1}  # a shard, so a checkpoint, a chunk
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    assert finished(curate_run(one_pass("first", 6), tmp_path / "first.log")) == 0
    second = one_pass("second", 7)  # normalize replays, filter_length runs
    killed = tmp_path / "killed.log"
    assert finished(curate_run(second, killed, kill_at="shard_write:3")) == -signal.SIGKILL
    assert phases(killed)["cache_read"] >= 3
    staging = next((tmp_path / "out" / "t").glob(".staging-*"))
    assert list(staging.glob("pass-0/part-*.ckpt.json"))  # resumed from, not started over
    resumed = tmp_path / "resumed.log"
    assert finished(curate_run(second, resumed)) == 0
    assert finished(curate_run(one_pass("scratch", 7, "scratch"), tmp_path / "s.log")) == 0
    assert published(tmp_path / "out" / "t") == published(tmp_path / "scratch" / "t")

"""SIGKILL at many moments: nothing half-written is ever visible, and the next run resumes
from what had completed and publishes shards byte-identical to an uninterrupted run.

Kills are targeted at a random occurrence of a random phase (the run kills its own process
group when it enters that phase for the n-th time: a power cut at that moment), plus a few
kills from outside at a random time. Every phase (reading, map, shard_write, barrier,
publish) must be hit at least once. Run with `-s` to see the table of trials.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import zstandard
from conftest import corpus, write_jsonl, write_recipe

from curate.verify import verify

PHASES = ("reading", "map", "shard_write", "barrier", "publish")
TRIALS = 22


def make_project(folder: Path) -> Path:
    docs = corpus(1600, dup_every=4)
    write_jsonl(folder / "data" / "a.jsonl", docs[:500])
    write_jsonl(folder / "data" / "b.jsonl", docs[500:900])
    raw = "".join(json.dumps(d) + "\n" for d in docs[900:]).encode()
    (folder / "data" / "big.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(raw))
    return write_recipe(
        folder,
        inputs=["data/*.jsonl", "data/*.jsonl.zst"],
        partition_size="30KB",
        batch_size="3KB",
        stages=[{"normalize": {}}, {"filter_length": {"min_words": 6}}, {"exact_dedup": {}}],
        output={"root": "out", "fsync": False, "shard_size": "8KB"},
        engine={"workers": 1},
    )


def curate_run(
    recipe: Path, log: Path, kill_at: str | None = None, kill_after: float | None = None
) -> int:
    env = {**os.environ, "CURATE_PHASE_LOG": str(log)}
    if kill_at:
        env["CURATE_KILL_AT"] = kill_at
    proc = subprocess.Popen(
        [sys.executable, "-m", "curate.cli", "run", str(recipe), "--quiet"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    if kill_after is not None:
        time.sleep(kill_after)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode in (0, -signal.SIGKILL), err.decode()
    return proc.returncode


def phases(log: Path) -> list[str]:
    return [line.split()[0] for line in log.read_text().splitlines()] if log.exists() else []


def published(root: Path) -> dict[str, object]:
    latest = (root / "LATEST").read_text().strip()
    m = json.loads((root / latest / "manifest.json").read_text())
    return {key: [f["sha256"] for f in m[key]] for key in ("shards", "rejected", "quarantine")} | {
        "counts": m["counts"]
    }


@pytest.mark.timeout(1200)
def test_kills_at_random_moments_leave_nothing_visible_and_resume_identically(
    tmp_path: Path,
) -> None:
    recipe = make_project(tmp_path)
    root = tmp_path / "out" / "t"
    full_log = tmp_path / "full.log"
    started = time.perf_counter()
    assert curate_run(recipe, full_log) == 0
    full_seconds = time.perf_counter() - started
    reference = published(root)
    full = Counter(phases(full_log))
    assert all(full[p] for p in PHASES), full

    rng = random.Random(20261202)
    hit: Counter[str] = Counter()
    saved = 0
    rows = []
    for trial in range(TRIALS):
        shutil.rmtree(tmp_path / "out", ignore_errors=True)
        for log in tmp_path.glob("trial-*.log"):
            log.unlink()
        kill_log, resume_log = tmp_path / "trial-kill.log", tmp_path / "trial-resume.log"
        if trial % 6 == 5:  # from outside, at a random time
            code = curate_run(recipe, kill_log, kill_after=rng.uniform(0.2, full_seconds))
        else:
            phase = PHASES[trial % len(PHASES)] if trial < len(PHASES) else rng.choice(PHASES)
            code = curate_run(recipe, kill_log, kill_at=f"{phase}:{rng.randint(1, full[phase])}")
        marks = phases(kill_log)
        landed = "(finished)" if code == 0 else marks[-1] if marks else "(start-up)"
        hit[landed] += 1
        # nothing visible but complete versions
        for folder in root.glob("v*") if root.exists() else []:
            assert verify(folder) == [], (trial, landed, verify(folder))
        assert curate_run(recipe, resume_log) == 0
        assert published(root) == reference, (trial, landed)
        assert not list(root.glob(".staging-*")), "staging left behind after success"
        redone = Counter(phases(resume_log))
        saved += full["map"] - redone["map"]
        rows.append(
            f"trial {trial:2d}: killed in {landed:<11} resumed with {redone['map']:3d}/{full['map']} map batches"
        )
    print("\n" + "\n".join(rows))
    print(f"phases hit: {dict(hit)}; map batches not redone: {saved}")
    assert all(hit[p] for p in PHASES), hit
    assert saved > TRIALS * full["map"] // 4  # resumes reuse what had completed

"""SIGKILL at many moments: nothing half-written is ever visible, and the next run resumes
from what had completed and publishes shards byte-identical to an uninterrupted run.

Kills are targeted at a random occurrence of a random phase (the run kills its own process
group when it enters that phase for the n-th time: a power cut at that moment), plus a few
kills from outside at a random time. Every phase (reading, map, shard_write, barrier,
publish) must be hit at least once. Run with `-s` to see the table of trials.

`curate gc` is killed the same way while it unlists, renames and deletes versions.
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
from click.testing import CliRunner
from conftest import corpus, write_jsonl, write_recipe

from curate.cli import main
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


GC_PHASES = ("gc_unlist", "gc_rename", "gc_delete")
GC_TRIALS = 12


def curate_gc(target: Path, log: Path, kill_at: str | None = None) -> int:
    env = {**os.environ, "CURATE_PHASE_LOG": str(log)}
    if kill_at:
        env["CURATE_KILL_AT"] = kill_at
    proc = subprocess.run(
        [sys.executable, "-m", "curate.cli", "gc", str(target), "--keep", "1"],
        env=env, capture_output=True, timeout=300, start_new_session=True,
    )  # fmt: skip
    assert proc.returncode in (0, -signal.SIGKILL), proc.stderr.decode()
    return proc.returncode


def copy_writable(src: Path, dst: Path) -> None:
    if dst.exists():
        for p in [dst, *dst.rglob("*")]:
            if p.is_dir() and not p.is_symlink():
                p.chmod(0o755)
        shutil.rmtree(dst)
    shutil.copytree(src, dst)


@pytest.mark.timeout(900)
def test_gc_killed_at_random_moments_never_leaves_a_half_deleted_version(tmp_path: Path) -> None:
    """SIGKILL gc while it unlists, renames and deletes: every version still listed, found by
    fingerprint or named by LATEST is complete; the next run rebuilds what gc had started to
    remove rather than calling a damaged version up to date; the next gc finishes the job."""
    import curate
    from curate.store import Store

    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(400, dup_every=0))

    def recipe(i: int) -> Path:
        stages = [{"filter_length": {"min_words": i}}]
        output = {"root": "out", "fsync": False, "shard_size": "4KB"}  # a few files to delete
        return write_recipe(tmp_path, stages=stages, output=output, partition_size="10KB")

    for i in range(3):
        curate.run(recipe(i)).release()
    out, pristine = tmp_path / "out", tmp_path / "pristine"
    shutil.copytree(out, pristine)
    dataset = out / "t"
    fingerprints = [
        json.loads((dataset / v / "manifest.json").read_text())["fingerprint"]
        for v in ("v1", "v2", "v3")
    ]
    full_log = tmp_path / "gc-full.log"
    assert curate_gc(dataset, full_log) == 0
    full = Counter(phases(full_log))
    assert all(full[p] for p in GC_PHASES), full

    rng = random.Random(20261203)
    rows = []
    for trial in range(GC_TRIALS):
        copy_writable(pristine, out)
        log = tmp_path / "gc-trial.log"
        log.unlink(missing_ok=True)
        phase = GC_PHASES[trial] if trial < len(GC_PHASES) else rng.choice(GC_PHASES)
        nth = rng.randint(1, full[phase])
        assert curate_gc(dataset, log, kill_at=f"{phase}:{nth}") == -signal.SIGKILL
        store = Store(out, "t")
        listed = store.versions()
        for v in listed:  # listed means complete
            assert verify(dataset / v) == [], (trial, phase, nth, v)
        latest = store.latest()
        assert latest in listed and verify(dataset / latest) == []
        for fp in fingerprints:  # found by fingerprint means complete
            found = store.find(fp)
            assert found is None or verify(found) == [], (trial, phase, nth, found)
        log_lines = CliRunner().invoke(main, ["log", str(dataset)]).stdout.splitlines()
        assert all("unfinished removal" in line for line in log_lines if ".deleting-" in line)
        # a recipe whose version gc was removing: up to date only if it is whole, else rebuilt
        again = curate.run(recipe(rng.choice([0, 1])))
        assert verify(again.path) == [], (trial, phase, nth)
        rows.append(f"trial {trial:2d}: killed at {phase}:{nth:<3d} next run "
                    f"{'up to date' if again.up_to_date else 'rebuilt ' + again.name}")  # fmt: skip
        again.release()
        finish = CliRunner().invoke(main, ["gc", str(dataset), "--keep", "1"])
        assert finish.exit_code == 0, finish.output  # the next gc finishes what was started
        assert not list(dataset.glob(".deleting-*")), trial
        assert store.versions() == [store.latest()], trial
    print("\n" + "\n".join(rows))


@pytest.mark.parametrize("path", ["../outside-00000-00000.arrow", "{abs}", "pass-0/../../x.arrow"])
def test_a_staged_record_naming_a_file_outside_the_staging_is_not_resumed(
    tmp_path: Path, path: str
) -> None:
    """A resumed run moves the files its staged records name into the version: a record
    (planted in a shared dataset folder) naming `../x` with that file's size moved a file
    from outside the dataset into the published version."""
    from curate.staging.record import files_intact

    staging = tmp_path / "dataset" / ".staging-0123456789abcdef0123"
    (staging / "pass-0").mkdir(parents=True)
    outside = tmp_path / "dataset" / "outside-00000-00000.arrow"
    outside.write_bytes(b"x" * 896)
    (tmp_path / "dataset" / "x.arrow").write_bytes(b"x" * 896)
    (staging / "pass-0" / "rejected-00000-00000.arrow").write_bytes(b"x" * 896)
    path = path.format(abs=outside)
    files = {
        "shards": [],
        "quarantine": [],
        "segments": [],
        "rejected": [{"path": path, "bytes": 896}],
    }
    assert files_intact(staging, files) is False
    files["rejected"][0]["path"] = "pass-0/rejected-00000-00000.arrow"
    assert files_intact(staging, files) is True

"""Ctrl-C during `curate run` says the completed work is kept and how to resume, exits 130,
promptly (the workers are terminated, not waited for) and without a worker's traceback,
however many times it is pressed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import corpus, write_jsonl, write_recipe

from curate.io.partition_key import partition_key
from curate.verify import verify

TESTS = Path(__file__).resolve().parent
INTERRUPTED = "interrupted: completed partitions are kept; run the same recipe again to resume"


def test_ctrl_c_keeps_completed_partitions_and_says_how_to_resume(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(20000, dup_every=0))
    recipe = write_recipe(
        tmp_path,
        partition_size="8KB",  # many partitions: the run is still going when Ctrl-C comes
        stages=[{"normalize": {}}, {"filter_length": {"min_words": 3}}],
        output={"root": "out", "fsync": False},
    )
    log = tmp_path / "phases.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "curate.cli", "run", str(recipe), "--quiet"],
        env={**os.environ, "CURATE_PHASE_LOG": str(log)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while "shard_write" not in (log.read_text() if log.exists() else ""):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends the whole foreground group
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err.decode()
    assert err.decode().strip().splitlines()[-1] == (
        "interrupted: completed partitions are kept; run the same recipe again to resume"
    )
    dataset = tmp_path / "out" / "t"
    assert not (dataset / "LATEST").exists() and list(dataset.glob(".staging-*"))
    again = subprocess.run(
        [sys.executable, "-m", "curate.cli", "run", str(recipe), "--quiet"],
        capture_output=True, timeout=300,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr.decode()
    assert verify(dataset / "v1") == []


@pytest.mark.parametrize(
    "start",
    [
        pytest.param([], id="fork"),
        # a user stage importing polars, whose thread pool rules fork out: a forkserver
        # starts the workers instead
        pytest.param([{"polars_stage:PolarsKeepAll": {}}], id="forkserver"),
    ],
)
def test_ctrl_c_twice_stops_at_once_without_a_worker_traceback_and_resumes(
    tmp_path: Path, start: list[dict[str, Any]]
) -> None:
    """Both workers are stalled in a partition (as in a long tokenizer or Presidio call) and a
    third is queued. Before, the driver waited for all three: minutes here. Now the first
    Ctrl-C terminates the workers and the command exits within a second or two (the bound
    leaves room for a loaded machine; measured 0.2-0.4 s), and the second one, pressed while
    it stops, changes nothing. The partition completed before is kept and not run again."""
    for k in range(4):  # one partition each; p0 completes, p1 and p2 stall, p3 waits
        write_jsonl(tmp_path / "data" / f"p{k}.jsonl", corpus(20, dup_every=0, prefix=f"p{k}-"))
    recipe = write_recipe(tmp_path, stages=[{"custom_stages:Stall": {}}, *start],
                          engine={"workers": 2})  # fmt: skip
    markers = tmp_path / "stalled"
    markers.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "curate.cli", "run", str(recipe), "--quiet"],
        env={**env, "CURATE_TEST_STALL": str(markers)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while len(list(markers.iterdir())) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    workers = [int(m.name.split("-")[0]) for m in markers.iterdir()]
    pressed = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends the whole foreground group
    time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)  # impatient: again, while it stops
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError("a stalled run did not stop on Ctrl-C within 60 s") from None
    elapsed = time.monotonic() - pressed
    stderr = err.decode()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and stderr.strip().splitlines() == [INTERRUPTED]
    assert elapsed < 3, f"{elapsed:.2f} s from Ctrl-C to exit"
    for pid in workers:  # terminated with the driver, not left running their partition
        while Path(f"/proc/{pid}").exists() and "Z" not in _state(pid):
            assert time.monotonic() - pressed < 10, f"worker {pid} still runs"
            time.sleep(0.05)
    dataset = tmp_path / "out" / "t"
    assert not (dataset / "LATEST").exists()
    staging = next(dataset.glob(".staging-*"))
    size = (tmp_path / "data" / "p0.jsonl").stat().st_size
    first = partition_key("data/p0.jsonl", "bytes", 0, size)  # its shards' and records' name
    assert sorted(p.name for p in staging.glob("pass-0/part-*.json")) == [f"part-{first}.json"]
    again = subprocess.run(
        [sys.executable, "-m", "curate.cli", "-v", "run", str(recipe), "--quiet"],
        env=env, capture_output=True, timeout=300,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr.decode()
    assert "pass 1: reusing 1 completed partitions" in again.stderr.decode()
    assert verify(dataset / "v1") == []


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return "gone"

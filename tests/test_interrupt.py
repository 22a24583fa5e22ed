"""Ctrl-C during `curate run` says the completed work is kept and how to resume, exits 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import corpus, write_jsonl, write_recipe

from curate.verify import verify


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

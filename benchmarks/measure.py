"""Measure one contender run: wall time, CPU time of the whole tree, peak memory.

CPU and wall come from ``benchmarks.reaper``, which reaps every descendant (see its
docstring for why ``wait4`` alone undercounts). Memory is sampled from here every
50 ms with psutil over the reaper's descendants: the peak of the summed RSS of the
tree (shared pages of forked workers count once per process, as ``ps`` shows them)
and the peak RSS of any single process.

The machine is shared, so each run also records the foreign load: CPU seconds the
whole machine was busy (including time the hypervisor stole) that were neither the
contender's nor this process's. The harness re-runs a contender that had to share.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

SAMPLE_SECONDS = 0.05
MIB = 1 << 20


@dataclass
class Measurement:
    wall_s: float
    user_s: float
    sys_s: float
    peak_tree_rss: int
    peak_proc_rss: int
    stdout: str
    foreign_cpu_s: float = 0.0

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.sys_s

    @property
    def foreign_load(self) -> float:
        """Average number of cores other processes kept busy during the run."""
        return self.foreign_cpu_s / self.wall_s


class RunFailed(RuntimeError):
    """A contender exited non-zero; the message carries the end of its log."""


class _MemorySampler(threading.Thread):
    def __init__(self, root_pid: int):
        super().__init__(daemon=True)
        self.root = psutil.Process(root_pid)
        self.stop = threading.Event()
        self.peak_tree = 0
        self.peak_proc = 0

    def run(self) -> None:
        while not self.stop.wait(SAMPLE_SECONDS):
            self.sample()

    def sample(self) -> None:
        try:
            tree = self.root.children(recursive=True)
        except psutil.NoSuchProcess:
            return
        total = 0
        for proc in tree:
            try:
                rss = proc.memory_info().rss
            except psutil.NoSuchProcess:
                continue
            total += rss
            self.peak_proc = max(self.peak_proc, rss)
        self.peak_tree = max(self.peak_tree, total)


def run_measured(
    command: list[str], log: Path, env: dict[str, str] | None = None, nice: int = 0
) -> Measurement:
    """Run command under the reaper; its stdout is returned, stderr goes to log.

    A negative nice (root only) lets the contender's tree win the CPU from other work
    on a shared machine, so its wall time depends less on what else runs. With the
    kernel's autogroups, nice only ranks processes of one session, so the contender
    gets a session of its own and the nice is set on that session's group too.
    """
    result = log.with_suffix(".rusage.json")
    wrapped = [sys.executable, "-m", "benchmarks.reaper", str(result), "--", *command]
    cwd = Path(__file__).resolve().parent.parent
    stdout_path = log.with_suffix(".stdout")
    busy_before, own_before = machine_busy(), own_cpu()
    with open(stdout_path, "wb") as out, open(log, "wb") as err:
        proc = subprocess.Popen(
            wrapped,
            stdout=out,
            stderr=err,
            cwd=cwd,
            env=env or os.environ,
            start_new_session=bool(nice),
            preexec_fn=(lambda: _renice(nice)) if nice else None,
        )
        sampler = _MemorySampler(proc.pid)
        sampler.start()
        proc.wait()
        sampler.stop.set()
        sampler.join()
    busy, own = machine_busy() - busy_before, own_cpu() - own_before
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise RunFailed(f"{' '.join(command)} exited {proc.returncode}; {log}:\n{tail}")
    usage = json.loads(result.read_text())
    # The reaper's own start-up is outside its count but inside the machine's.
    foreign = max(0.0, busy - own - usage["user_s"] - usage["sys_s"])
    return Measurement(
        wall_s=usage["wall_s"],
        user_s=usage["user_s"],
        sys_s=usage["sys_s"],
        peak_tree_rss=sampler.peak_tree,
        peak_proc_rss=sampler.peak_proc,
        stdout=stdout_path.read_text(),
        foreign_cpu_s=foreign,
    )


def run_curate_recipe(recipe: dict[str, Any], out: Path, log: Path) -> tuple[Measurement, Path]:
    """Write `recipe` into a fresh `out`, run this venv's `curate run` on it under the
    reaper, and return the measurement and the version folder it published (v1)."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    path = out / "recipe.yaml"
    path.write_text(json.dumps(recipe))  # JSON is YAML
    cli = str(Path(sys.executable).with_name("curate"))
    return run_measured([cli, "run", "--quiet", str(path)], log), out / recipe["name"] / "v1"


def wait_for_quiet(max_load: float, patience_s: float) -> float:
    """Wait until the machine's other load over a second is at most max_load cores.

    Gives up after patience_s and returns the load last seen either way.
    """
    deadline = time.monotonic() + patience_s
    while True:
        before = machine_busy()
        time.sleep(1.0)
        load = machine_busy() - before
        if load <= max_load or time.monotonic() > deadline:
            return load
        time.sleep(2.0)


def _renice(nice: int) -> None:
    with contextlib.suppress(OSError):  # not root, or no autogroups: as it comes
        Path("/proc/self/autogroup").write_text(str(nice))
    with contextlib.suppress(OSError):
        os.nice(nice)


def machine_busy() -> float:
    """CPU seconds the whole machine has been busy (all cores, steal included) since boot:
    /proc/stat's user, nice, system, irq, softirq and steal (guest time is inside user)."""
    t = psutil.cpu_times()
    parts = ("user", "nice", "system", "irq", "softirq", "steal")
    return float(sum(getattr(t, name, 0.0) for name in parts))


def own_cpu() -> float:
    times = os.times()
    return times.user + times.system


def decide_seconds(manifest: dict[str, Any]) -> dict[str, float]:
    """Each barrier stage's decision time, as a version's manifest records it."""
    return {
        s["name"]: s["details"]["decision"]["seconds"]
        for s in manifest["stages"]
        if "decision" in s["details"]
    }


def shard_sums(manifest: dict[str, Any]) -> list[tuple[str, str]]:
    """(path, sha256) of each shard: equal lists mean byte-identical versions."""
    return [(s["path"], s["sha256"]) for s in manifest["shards"]]

"""What the Ray engine adds to the local engine, in seconds per pass and per barrier decision.

One Ray cluster (a `ray start --head --block` of this machine, `--workers` CPUs, no
dashboard) is started once and reused by every round, as a team's cluster is up before a
run. Each round runs each case twice, alternating order: `curate run` on the local engine
with `--workers` processes, and on the Ray engine with the same workers, connected to the
cluster by address. Cases:

  trivial   normalize alone over sample_data/ (a pass that does almost nothing: what is
            left is the engine's fixed cost per pass)
  sample    recipes/sample.yaml as it is (eight stages, two barriers)
  full      the full pre-training recipe (normalize, exact_dedup, minhash_dedup, pii,
            tokenize with Mistral 7B's SentencePiece model, packed 4096) over
            benchmarks/work/corpus-<size>, default partition_size (the CPU-bound case)

Counted for each run: wall and CPU of the driver's whole process tree (benchmarks/reaper.py),
and for Ray the CPU of the cluster's processes too (gcs_server, raylet, the agents, the
workers: every process in the head's session, sampled with psutil every 100 ms, so a
process that exits loses at most its last 100 ms), from the run's start until one second
after its end, and the worker processes each Ray run started (each boots Python and Ray
before it runs a task). The manifest gives each pass's wall, each decision's wall and the
connect time (`setup`). Overheads are medians of the paired differences (Ray minus local,
same round); ratios are medians of paired ratios. Ray starts its workers at nice 15; this
cluster sets `RAY_worker_niceness=0`, so both engines' workers meet foreign load at the
same priority. Foreign load is the machine's other CPU, cluster idle included for local
runs (its idle rate is reported). Shards must be byte-identical.

    /work/venv/bin/python -m benchmarks.ray_overhead --cases trivial sample --rounds 5
    /work/venv/bin/python -m benchmarks.ray_overhead --cases full --size 300 --rounds 6 \
        --side-by-side

`--side-by-side` runs each round's two runs at once, each on a core of its own (the Ray
driver and every process of the cluster on one, the local run on the other, swapped every
round; `run_side_by_side`), for the CPU ratio of a CPU-bound case on a machine whose speed
drifts by more than the ratio's target between one run and the next.

Results: benchmarks/results/ray_overhead-<cases>.{md,json}.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil
import yaml

from benchmarks import pass_clock
from benchmarks.measure import (
    RunFailed,
    decide_seconds,
    machine_busy,
    own_cpu,
    run_measured,
    shard_sums,
    wait_for_quiet,
)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORK = HERE / "work" / "ray_overhead"
RAY = Path(sys.executable).with_name("ray")
CLI = Path(sys.executable).with_name("curate")
PINNED = {"OMP_NUM_THREADS": "1", "ARROW_IO_THREADS": "1", "RAYON_NUM_THREADS": "1"}
SAMPLE_SECONDS = 0.1


# -- the cluster --------------------------------------------------------------------------


def environment(tree: Path) -> dict[str, str]:
    """Drivers' and the cluster's environment: one thread per library pool, the tree under
    test first on the path (the cluster's workers import it too), no usage reports."""
    from curate.engines.ray.connect import LOCAL_ENVIRONMENT

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    quiet = {k: v for k, v in LOCAL_ENVIRONMENT.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    env.update(quiet)
    env.update(PINNED)
    env["RAY_AUTH_MODE"] = "disabled"
    env["RAY_worker_niceness"] = "0"  # Ray's workers run at nice 15 by default; local's at 0
    env["PYTHONPATH"] = str(tree)
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


class Cluster:
    """A one-node Ray cluster in a session of its own, stopped by its process ids (never
    `ray stop`, which stops every Ray process on the machine)."""

    def __init__(self, cpus: int, env: dict[str, str], log: Path) -> None:
        from ray._private.services import get_node_ip_address

        self.temp = tempfile.mkdtemp(prefix="rayoh-")  # Ray's socket paths stay < 108 bytes
        ip = str(get_node_ip_address())
        port = free_port()
        self.address = f"{ip}:{port}"
        command = [
            str(RAY), "start", "--head", "--block", f"--num-cpus={cpus}", f"--port={port}",
            "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={self.temp}",
            f"--node-ip-address={ip}", "--dashboard-agent-listen-port=0",
        ]  # fmt: skip
        with open(log, "wb") as out:
            self.process = subprocess.Popen(
                command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + 120
        while not _listening(ip, port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"the Ray head did not start: {log.read_text()[-2000:]}")
            time.sleep(0.5)
        time.sleep(3)  # the raylet and its agents come up after the GCS port opens
        self.cpu = SessionCpu(self.process.pid)
        self.cpu.start()

    def stop(self) -> None:
        if getattr(self, "cpu", None) is not None:
            self.cpu.halt.set()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=15)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        shutil.rmtree(self.temp, ignore_errors=True)


def _listening(ip: str, port: int) -> bool:
    try:
        with socket.create_connection((ip, port), timeout=1):
            return True
    except OSError:
        return False


class SessionCpu(threading.Thread):
    """CPU seconds of every process in one session (the Ray head's daemons and workers,
    which are not the driver's descendants), summed over every process ever seen in it."""

    def __init__(self, sid: int) -> None:
        super().__init__(daemon=True)
        self.sid = sid
        self.halt = threading.Event()
        self.lock = threading.Lock()
        self.seen: dict[tuple[int, float], tuple[str, float]] = {}  # (pid, start) -> name, cpu
        self.sids: dict[int, int] = {}  # a process keeps its session (pids reused: rarely)
        self.procs: dict[int, tuple[psutil.Process, tuple[int, float], str]] = {}

    def run(self) -> None:
        while not self.halt.wait(SAMPLE_SECONDS):
            self.sample()

    def sample(self) -> None:
        for pid in psutil.pids():
            try:
                if pid not in self.sids:
                    self.sids[pid] = os.getsid(pid)
                    if self.sids[pid] == self.sid:
                        proc = psutil.Process(pid)
                        self.procs[pid] = (proc, (pid, proc.create_time()), _role(proc))
                if self.sids[pid] != self.sid:
                    continue
                proc, key, name = self.procs[pid]
                t = proc.cpu_times()
            except (psutil.Error, ProcessLookupError, PermissionError, KeyError):
                continue
            with self.lock:
                self.seen[key] = (name, t.user + t.system)

    def started(self, role: str, since: float) -> int:
        """Processes of this role that started at `since` (a time.time()) or later."""
        with self.lock:
            return sum(1 for (_, t), (name, _) in self.seen.items() if name == role and t >= since)

    def total(self) -> dict[str, float]:
        """CPU seconds so far, per role (gcs_server, raylet, worker, ...)."""
        self.sample()
        out: dict[str, float] = {}
        with self.lock:
            for name, cpu in self.seen.values():
                out[name] = out.get(name, 0.0) + cpu
        return out


ROLES = {
    "gcs_server": "gcs_server",
    "raylet/raylet": "raylet",
    "dashboard_agent": "dashboard_agent",
    "DashboardAgent": "dashboard_agent",
    "runtime_env": "runtime_env_agent",
    "RuntimeEnvAgent": "runtime_env_agent",
    "log_monitor": "log_monitor",
    "dashboard/dashboard.py": "dashboard",
    "autoscaler/_private/monitor.py": "monitor",
    "default_worker.py": "worker",
}


def _role(proc: psutil.Process) -> str:
    line = " ".join(proc.cmdline())
    for needle, role in ROLES.items():
        if needle in line:
            return role
    if line.startswith("ray::"):
        return "worker"
    if " start " in f" {line} " and "--head" in line:
        return "ray_start"
    return proc.name()


def delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: round(v - before.get(k, 0.0), 3) for k, v in after.items()}


# -- recipes ------------------------------------------------------------------------------


def sample_recipe(stages: list[dict[str, Any]] | None) -> dict[str, Any]:
    """recipes/sample.yaml with absolute paths (its stages, or `stages`)."""
    recipe = yaml.safe_load((REPO / "recipes" / "sample.yaml").read_text())
    base = REPO / "recipes"
    recipe["inputs"] = [str((base / p).resolve()) for p in recipe["inputs"]]
    for stage in recipe["stages"]:
        if "tokenize" in stage:
            stage["tokenize"]["source"] = str((base / stage["tokenize"]["source"]).resolve())
    if stages is not None:
        recipe["stages"] = stages
    return recipe


def full_recipe(size: int, corpus: Path | None) -> dict[str, Any]:
    from benchmarks.partition_parallelism import pretrain_recipe

    folder = corpus or HERE / "work" / f"corpus-{size}"
    files = sorted(folder.glob("*.jsonl"))
    if not files:
        raise SystemExit(f"{folder}: no corpus; python -m benchmarks.corpus --size {size}")
    recipe = pretrain_recipe(files[0], Path("out"), workers=2, partition_size=None)
    recipe["inputs"] = [str(f) for f in files]
    return recipe


def recipe_for(case: str, args: argparse.Namespace) -> dict[str, Any]:
    if case == "trivial":
        return sample_recipe([{"normalize": {}}])
    if case == "sample":
        return sample_recipe(None)
    return full_recipe(args.size, args.corpus)


# -- runs ---------------------------------------------------------------------------------


@dataclass
class Run:
    case: str
    engine: str
    round: int
    wall_s: float
    driver_cpu_s: float
    cluster_cpu_s: float
    foreign_load: float
    cluster_cpu: dict[str, float] = field(default_factory=dict)
    workers: int = 0  # Ray worker processes the run started (each boots Python and Ray)
    timings: dict[str, float] = field(default_factory=dict)
    decide_s: dict[str, float] = field(default_factory=dict)
    # side by side: CPU-s of its processes during each pass (the cluster's daemons and
    # workers with the Ray run's), from `RunCpu` and `benchmarks.pass_clock`
    pass_cpu: dict[str, float] = field(default_factory=dict)
    passes_at: dict[str, tuple[float, float]] = field(default_factory=dict)
    shards: list[tuple[str, str]] = field(default_factory=list)

    @property
    def cpu_s(self) -> float:
        return self.driver_cpu_s + self.cluster_cpu_s

    def passes(self) -> dict[str, float]:
        return {k: v for k, v in self.timings.items() if k.startswith("pass_")}


def run_one(
    case: str, kind: str, rnd: int, cluster: Cluster, env: dict[str, str], args: argparse.Namespace,
    core: int | None = None,
) -> Run:  # fmt: skip
    """One `curate run` of the case on this engine; with `core`, the driver's whole tree on
    that core alone (and the caller has waited for a quiet machine)."""
    folder = WORK / case / kind
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    recipe = recipe_for(case, args)
    recipe["name"] = case
    recipe["output"] = {**recipe.get("output", {}), "root": str(folder / "out")}
    engine: dict[str, Any] = {"kind": kind, "workers": args.workers}
    if kind == "ray":
        engine["address"] = cluster.address
    recipe["engine"] = engine
    path = folder / "recipe.yaml"
    path.write_text(json.dumps(recipe))  # JSON is YAML
    if core is None:
        wait_for_quiet(args.max_load, args.patience)
    pinned = [] if core is None else ["taskset", "-c", str(core)]
    clock = folder / "passes.jsonl"
    # side by side, each pass's moments, to split each side's CPU by pass (`RunCpu`)
    timed = [sys.executable, "-m", "benchmarks.pass_clock", str(clock)]
    cli = [str(CLI)] if core is None else timed
    before, since = cluster.cpu.total(), time.time()
    m = run_measured([*pinned, *cli, "run", "--quiet", str(path)], folder / "run.log", env=env)
    time.sleep(1.0)  # what the cluster does once the driver left (its workers ending)
    used = delta(cluster.cpu.total(), before)
    cluster_s = sum(used.values())
    manifest = json.loads(next((folder / "out").glob(f"{case}/v*/manifest.json")).read_text())
    return Run(
        case=case,
        engine=kind,
        round=rnd,
        wall_s=m.wall_s,
        driver_cpu_s=m.cpu_s,
        cluster_cpu_s=cluster_s if kind == "ray" else 0.0,
        # the cluster's CPU is the run's own on Ray; idling, it is foreign load to local
        foreign_load=max(0.0, m.foreign_cpu_s - (cluster_s if kind == "ray" else 0.0)) / m.wall_s,
        cluster_cpu={k: v for k, v in used.items() if v} if kind == "ray" else {},
        workers=cluster.cpu.started("worker", since - 0.05) if kind == "ray" else 0,
        timings=manifest["timings"],
        decide_s=decide_seconds(manifest),
        shards=shard_sums(manifest),
        passes_at=pass_clock.read(clock),
    )


class RunCpu(threading.Thread):
    """Each side's CPU-seconds over time, by process, sampled every 100 ms: the local run
    (every process whose command line names its recipe: the driver and the workers it
    forked) and the Ray run (the same for its driver, and every process of the cluster's
    session: daemons and workers). A process that exits keeps the last CPU seen. What a
    side used between two moments is what its processes used, wherever they ran (a
    core's busy time would also hold whatever else the scheduler put there)."""

    def __init__(self, sid: int, recipes: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.sid = sid
        self.recipes = recipes  # side -> a recipe path its drivers' command lines hold
        self.halt = threading.Event()
        self.side: dict[tuple[int, float], str | None] = {}  # (pid, start) -> side
        self.cpu: dict[tuple[int, float], tuple[str, float]] = {}  # -> side, CPU-s last seen
        self.series: dict[str, list[tuple[float, float]]] = {k: [] for k in recipes}

    def _side(self, proc: psutil.Process) -> str | None:
        if os.getsid(proc.pid) == self.sid:
            return "ray"
        line = " ".join(proc.cmdline())
        if "benchmarks.reaper" in line:
            return None
        return next((side for side, path in self.recipes.items() if path in line), None)

    def sample(self) -> None:
        for proc in psutil.process_iter():
            try:
                key = (proc.pid, proc.create_time())
                if key not in self.side:
                    self.side[key] = self._side(proc)
                side = self.side[key]
                if side is None:
                    continue
                t = proc.cpu_times()
                self.cpu[key] = (side, t.user + t.system)  # own only: reaped children were seen
            except (psutil.Error, OSError):
                continue
        now = time.time()
        totals = dict.fromkeys(self.series, 0.0)
        for side, cpu in self.cpu.values():
            totals[side] += cpu
        for side, series in self.series.items():
            series.append((now, totals[side]))

    def run(self) -> None:
        self.sample()
        while not self.halt.wait(SAMPLE_SECONDS):
            self.sample()
        self.sample()

    def at(self, side: str, t: float) -> float:
        s = self.series[side]
        i = next((i for i, (ts, _) in enumerate(s) if ts >= t), len(s) - 1)
        if i == 0:
            return s[0][1]
        (t0, c0), (t1, c1) = s[i - 1], s[i]
        w = 0.0 if t1 <= t0 else min(1.0, max(0.0, (t - t0) / (t1 - t0)))
        return c0 + w * (c1 - c0)

    def between(self, side: str, start: float, end: float) -> float:
        return round(self.at(side, end) - self.at(side, start), 3)


def pin_session(sid: int, cores: set[int]) -> None:
    """Every thread of every process in session `sid` (the Ray head's daemons and workers)
    on `cores`; the processes and threads they start later inherit it."""
    for pid in psutil.pids():
        with contextlib.suppress(OSError):
            if os.getsid(pid) != sid:
                continue
            for task in os.listdir(f"/proc/{pid}/task"):
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(int(task), cores)


def run_side_by_side(
    case: str, rnd: int, cluster: Cluster, env: dict[str, str], args: argparse.Namespace
) -> list[Run]:
    """The local and the Ray run of a round at once, each on a core of its own (the Ray
    driver, and the cluster's every process with it, on one; the local run's tree on the
    other), the cores swapped every round: both see the same moments of a machine whose
    speed drifts by 15% within minutes, so a ratio of a few percent is not lost in it.
    Each run meets the other's load (its CPU-seconds rise alike on both sides) and has one
    core: the walls and fixed costs are not those of a run alone; the CPU ratio is what
    this is for. Foreign load: what neither run, the cluster nor this process used."""
    ray_core = rnd % 2
    pin_session(cluster.process.pid, {ray_core})
    wait_for_quiet(args.max_load, args.patience)
    busy, own = machine_busy(), own_cpu()
    recipes = {kind: str(WORK / case / kind / "recipe.yaml") for kind in ("local", "ray")}
    sides = RunCpu(cluster.process.pid, recipes)
    sides.start()
    done: dict[str, Run] = {}
    failed: list[BaseException] = []

    def one(kind: str, core: int) -> None:
        try:
            done[kind] = run_one(case, kind, rnd, cluster, env, args, core=core)
        except BaseException as exc:  # re-raised by the caller's thread
            failed.append(exc)

    threads = [
        threading.Thread(target=one, args=("ray", ray_core)),
        threading.Thread(target=one, args=("local", 1 - ray_core)),
    ]
    for t in threads if rnd % 2 == 0 else threads[::-1]:
        t.start()
    for t in threads:
        t.join()
    sides.halt.set()
    sides.join()
    pin_session(cluster.process.pid, set(range(os.cpu_count() or 1)))
    if failed:
        raise failed[0]
    for kind, run in done.items():
        run.pass_cpu = {k: sides.between(kind, a, b) for k, (a, b) in run.passes_at.items()}
    ours = own_cpu() - own
    used = sum(r.cpu_s for r in done.values())
    wall = max(r.wall_s for r in done.values())
    foreign = max(0.0, machine_busy() - busy - ours - used) / wall
    for r in done.values():
        r.foreign_load = round(foreign, 3)
    return [done["local"], done["ray"]]


# -- report -------------------------------------------------------------------------------


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def pairs(runs: list[Run], case: str) -> list[tuple[Run, Run]]:
    by_round: dict[int, dict[str, Run]] = {}
    for r in runs:
        if r.case == case:
            by_round.setdefault(r.round, {})[r.engine] = r
    return [(d["local"], d["ray"]) for _, d in sorted(by_round.items()) if len(d) == 2]


def case_report(case: str, runs: list[Run]) -> list[str]:
    pp = pairs(runs, case)
    if not pp:
        return []
    local0, ray0 = pp[0]
    identical = len({tuple(r.shards) for r in runs if r.case == case}) == 1
    lines = [
        f"## {case}",
        "",
        f"Shards byte-identical across all {2 * len(pp)} runs: **{'yes' if identical else 'NO'}**.",
        "",
        "| per run (medians) | local | Ray | Ray - local (median of pairs) |",
        "|---|---|---|---|",
    ]

    def row(label: str, get: Any, fmt: str = ".2f") -> None:
        lo = [get(a) for a, _ in pp]
        ra = [get(b) for _, b in pp]
        diff = [b - a for a, b in zip(lo, ra, strict=True)]
        lines.append(
            f"| {label} | {format(med(lo), fmt)} | {format(med(ra), fmt)} | "
            f"{format(med(diff), '+' + fmt)} |"
        )

    row("wall s", lambda r: r.wall_s)
    row("connect / start s (manifest setup)", lambda r: r.timings.get("setup", 0.0))
    for k in sorted(local0.passes()):
        row(f"{k} s", lambda r, k=k: r.timings.get(k, 0.0))
    for name in sorted(local0.decide_s):
        row(f"{name} decision s", lambda r, n=name: r.decide_s.get(n, 0.0))
    row("engine s (passes + decisions)", lambda r: r.timings.get("engine", 0.0))
    row("driver tree CPU s", lambda r: r.driver_cpu_s)
    row("cluster CPU s (daemons + workers)", lambda r: r.cluster_cpu_s)
    row("CPU s, all", lambda r: r.cpu_s)
    row("foreign load (cores)", lambda r: r.foreign_load)
    row("worker processes started", lambda r: float(r.workers), ".1f")
    by_pass = sorted(k for k in local0.pass_cpu if all(k in r.pass_cpu for p in pp for r in p))
    for k in by_pass:
        row(f"{k} CPU s (its processes, daemons counted)", lambda r, k=k: r.pass_cpu[k])
    ratio_cpu = med([b.cpu_s / a.cpu_s for a, b in pp])
    ratio_wall = med([b.wall_s / a.wall_s for a, b in pp])
    ratio_engine = med([b.timings["engine"] / a.timings["engine"] for a, b in pp])
    roles: dict[str, list[float]] = {}

    def by_median(kv: tuple[str, list[float]]) -> float:
        return -med(kv[1])

    for _, b in pp:
        for k, v in b.cluster_cpu.items():
            roles.setdefault(k, []).append(v)
    lines += [
        "",
        f"Ray / local (median of paired ratios): CPU (daemons counted) **{ratio_cpu:.3f}x**, "
        f"wall {ratio_wall:.3f}x, engine time {ratio_engine:.3f}x.",
        "",
    ]
    if by_pass:

        def pass_ratio(keys: list[str]) -> str:
            ratios = [
                sum(b.pass_cpu[k] for k in keys) / sum(a.pass_cpu[k] for k in keys) for a, b in pp
            ]
            spread = ", ".join(f"{x:.3f}" for x in ratios)
            return f"**{med(ratios):.3f}x** ({spread})"

        lines += [
            "Per pass, Ray / local CPU of the run's processes, Ray's daemons counted (median of "
            "paired ratios; the pairs): "
            + "; ".join(f"{k} {pass_ratio([k])}" for k in by_pass)
            + f"; all passes {pass_ratio(by_pass)}. A pass's CPU starts when the driver "
            "starts it; pass_0 holds each Ray worker's start-up and set-up.",
            "",
        ]
    lines += [
        "Cluster CPU by process role, Ray runs (median s): "
        + ", ".join(f"{k} {med(v):.2f}" for k, v in sorted(roles.items(), key=by_median)),
        "",
    ]
    del ray0
    return lines


def report(runs: list[Run], idle: dict[str, float], args: argparse.Namespace) -> str:
    command = " ".join(["/work/venv/bin/python -m benchmarks.ray_overhead", *sys.argv[1:]])
    how = (
        "each round's two runs side by side, one core each (the Ray driver and the whole "
        "cluster on one), the cores swapped every round: walls and fixed costs are not a "
        "lone run's, CPU ratios are what this measures"
        if args.side_by_side
        else "order alternating"
    )
    lines = [
        "# Ray engine overhead, cluster up (generated by benchmarks/ray_overhead.py)",
        "",
        f"{args.workers} workers on each engine; one Ray cluster ({args.workers} CPUs, no "
        f"dashboard) for all rounds; {args.rounds} rounds, {how}. "
        f"Machine: {os.cpu_count()} cores, shared. The idle cluster used "
        f"{sum(idle.values()):.3f} cores ("
        + ", ".join(f"{k} {v:.3f}" for k, v in sorted(idle.items()) if v > 0.0005)
        + ").",
        "",
    ]
    if "full" in args.cases:
        folder = args.corpus or HERE / "work" / f"corpus-{args.size}"
        files = sorted(folder.glob("*.jsonl"))
        mb = sum(f.stat().st_size for f in files) / 1e6
        lines += [f"Full case: {folder.name}, {mb:.1f} MB in {len(files)} files.", ""]
    for case in args.cases:
        lines += case_report(case, runs)
    lines += [
        "| round | case | engine | wall s | driver CPU s | cluster CPU s | foreign |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r.round} | {r.case} | {r.engine} | {r.wall_s:.2f} | {r.driver_cpu_s:.2f} | "
        f"{r.cluster_cpu_s:.2f} | {r.foreign_load:.2f} |"
        for r in runs
    ]
    lines += ["", f"Command: `{command}`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", default=["trivial", "sample"],
                        choices=["trivial", "sample", "full"])  # fmt: skip
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--size", type=int, default=300, help="the full case's corpus, MB")
    parser.add_argument(
        "--corpus",
        type=Path,
        help="the full case's corpus folder "
        "(default: benchmarks/work/corpus-<size>, python -m benchmarks.corpus)",
    )
    parser.add_argument("--max-load", type=float, default=0.3)
    parser.add_argument("--patience", type=float, default=20.0)
    parser.add_argument("--tree", type=Path, default=REPO, help="the curate tree under test")
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--side-by-side", action="store_true",
        help="run each round's local and Ray runs at once, one core each (for CPU ratios)",
    )  # fmt: skip
    args = parser.parse_args()
    out = args.out or HERE / "results" / f"ray_overhead-{'-'.join(args.cases)}.md"
    WORK.mkdir(parents=True, exist_ok=True)
    env = environment(args.tree.resolve())
    cluster = Cluster(args.workers, env, WORK / "head.log")
    runs: list[Run] = []
    try:
        time.sleep(10)  # the agents' start-up is not the idle cluster's rate
        before, t = cluster.cpu.total(), time.perf_counter()
        time.sleep(5)
        used, seconds = delta(cluster.cpu.total(), before), time.perf_counter() - t
        idle = {k: v / seconds for k, v in used.items()}
        for rnd in range(args.rounds):
            for case in args.cases:
                order = ["local", "ray"] if rnd % 2 == 0 else ["ray", "local"]
                try:
                    if args.side_by_side:
                        found = run_side_by_side(case, rnd, cluster, env, args)
                    else:
                        found = [run_one(case, kind, rnd, cluster, env, args) for kind in order]
                except RunFailed as exc:
                    raise SystemExit(str(exc)) from None
                for run in found:
                    runs.append(run)
                    print(
                        f"round {rnd} {case} {run.engine}: wall {run.wall_s:.2f} s, CPU "
                        f"{run.driver_cpu_s:.2f} + cluster {run.cluster_cpu_s:.2f} s "
                        f"({run.workers} workers started), "
                        f"passes {run.passes()}, decide {run.decide_s}, "
                        f"load {run.foreign_load:.2f}",
                        flush=True,
                    )
    finally:
        cluster.stop()
    text = report(runs, idle, args)
    out.write_text(text)
    out.with_suffix(".json").write_text(
        json.dumps({"idle": idle, "runs": [asdict(r) for r in runs]}, indent=1)
    )
    print(text)
    for case in args.cases:
        if len({tuple(r.shards) for r in runs if r.case == case}) != 1:
            raise SystemExit(f"{case}: shards differ between engines")


if __name__ == "__main__":
    main()

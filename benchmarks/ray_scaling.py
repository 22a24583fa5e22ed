"""The Ray engine's scaling note: one recipe on the local engine and on Ray, 1 and 2 workers.

Every contender is `curate run` in its own process on the same corpus, in the same run,
alternating order each round: the local engine with 1 and 2 worker processes, and the Ray
engine starting its own one-machine cluster with 1 and 2 CPUs (what `engine: {kind: ray}`
without an address does). Wall, CPU and peak RSS cover the whole process tree, Ray's
daemons and workers included (`benchmarks.measure`). The manifest's timings split a run
into cluster start (`setup`), passes and barrier decisions. All four must write the same
shards, byte for byte. A separate measurement gives `ray.init` on its own: its time and
the memory of an idle 2-CPU cluster.

    /work/venv/bin/python -m benchmarks.ray_scaling --rounds 2

It needs Ray and psutil in the interpreter that runs it, and writes
`results/ray_scaling.md` (and the raw runs as `.json`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.measure import (
    MIB,
    RunFailed,
    decide_seconds,
    run_measured,
    shard_sums,
    wait_for_quiet,
)

HERE = Path(__file__).resolve().parent
WORK = HERE / "work" / "ray"
CONTENDERS = [("local", 1), ("local", 2), ("ray", 1), ("ray", 2)]
STAGES = [  # the sample recipe's stages (recipes/sample.yaml)
    {"normalize": {"form": "NFC", "max_newlines": 2}},
    {"filter_length": {"min_words": 3}},
    {"exact_dedup": {}},
    {"minhash_dedup": {"threshold": 0.8}},
]
AT_REST = """
import json, os, sys, time
t = time.perf_counter()
import ray
imported = time.perf_counter() - t
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
started = time.perf_counter() - t
time.sleep(5)  # the sampler sees the idle cluster
ray.shutdown()
print(json.dumps({"import_s": imported, "init_s": started - imported}))
"""


@dataclass
class Run:
    name: str
    round: int
    wall_s: float
    cpu_s: float
    peak_tree_rss: int
    foreign_load: float
    timings: dict[str, float] = field(default_factory=dict)
    decide_s: dict[str, float] = field(default_factory=dict)
    shards: list[tuple[str, str]] = field(default_factory=list)


def label(kind: str, workers: int) -> str:
    return f"{kind}, {workers} worker{'s' if workers > 1 else ''}"


def write_recipe(corpus: Path, kind: str, workers: int, root: Path, part_size: str) -> Path:
    recipe = {
        "name": "scaling",
        "inputs": [str(corpus / "*.jsonl")],
        "id_field": "id",
        "partition_size": part_size,
        "stages": STAGES,
        "output": {"root": str(root), "fsync": False},
        "engine": {"kind": kind, "workers": workers},
    }
    path = WORK / f"{kind}-{workers}.yaml"
    path.write_text(json.dumps(recipe, indent=1))  # JSON is YAML
    return path


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["RAY_AUTH_MODE"] = "disabled"
    return env


def run_one(corpus: Path, kind: str, workers: int, rnd: int, args: argparse.Namespace) -> Run:
    root = WORK / "out" / f"{kind}-{workers}"
    shutil.rmtree(root, ignore_errors=True)
    recipe = write_recipe(corpus, kind, workers, root, args.partition_size)
    command = [sys.executable, "-m", "curate.cli", "run", "--quiet", str(recipe)]
    best = None
    for _ in range(args.attempts):
        wait_for_quiet(0.3, args.patience)
        shutil.rmtree(root, ignore_errors=True)
        m = run_measured(command, WORK / f"{kind}-{workers}-r{rnd}.log", env=environment())
        if best is None or m.foreign_load < best.foreign_load:
            best = m
        if m.foreign_load <= 0.3:
            break
    assert best is not None
    manifest = json.loads(next(root.glob("scaling/v*/manifest.json")).read_text())
    return Run(
        name=label(kind, workers),
        round=rnd,
        wall_s=best.wall_s,
        cpu_s=best.cpu_s,
        peak_tree_rss=best.peak_tree_rss,
        foreign_load=best.foreign_load,
        timings=manifest["timings"],
        decide_s=decide_seconds(manifest),
        shards=shard_sums(manifest),
    )


def at_rest() -> dict[str, Any]:
    log = WORK / "at-rest.log"
    m = run_measured([sys.executable, "-c", AT_REST], log, env=environment())
    return json.loads(m.stdout) | {"peak_tree_rss": m.peak_tree_rss, "wall_s": m.wall_s}


def median(runs: list[Run], name: str, get: Any) -> float:
    return statistics.median(get(r) for r in runs if r.name == name)


def passes_s(r: Run) -> float:
    return sum(v for k, v in r.timings.items() if k.startswith("pass_"))


COLUMNS: list[tuple[str, Any, str]] = [
    ("wall s", lambda r: r.wall_s, ".1f"),
    ("CPU s", lambda r: r.cpu_s, ".1f"),
    ("peak RSS MiB", lambda r: r.peak_tree_rss / MIB, ".0f"),
    ("cluster start s", lambda r: r.timings["setup"], ".1f"),
    ("passes s", passes_s, ".1f"),
    ("exact decide s", lambda r: r.decide_s.get("exact_dedup", 0.0), ".2f"),
    ("minhash decide s", lambda r: r.decide_s.get("minhash_dedup", 0.0), ".2f"),
    ("foreign load", lambda r: r.foreign_load, ".2f"),
]


def report(runs: list[Run], rest: dict[str, Any], corpus: Path, args: argparse.Namespace) -> str:
    names = [label(k, w) for k, w in CONTENDERS]
    identical = len({tuple(r.shards) for r in runs}) == 1
    meta = corpus / "corpus.json"
    docs = json.loads(meta.read_text()).get("docs", "?") if meta.exists() else "?"
    size = sum(f.stat().st_size for f in corpus.glob("*.jsonl")) / 1e6
    stages = ", ".join(next(iter(s)) for s in STAGES)
    lines = [
        "# Ray engine: scaling and overhead (generated by benchmarks/ray_scaling.py)",
        "",
        f"Corpus: {corpus.name} ({size:.0f} MB JSONL, {docs} documents), partition_size "
        f"{args.partition_size}; stages {stages}. {args.rounds} rounds, order alternating; "
        f"medians. Machine: {os.cpu_count()} cores, shared (foreign load: cores that other "
        "work kept busy meanwhile).",
        "",
        f"Shards byte-identical across all {len(runs)} runs: **{'yes' if identical else 'NO'}**.",
        "",
        "| contender | " + " | ".join(c[0] for c in COLUMNS) + " |",
        "|---" * (len(COLUMNS) + 1) + "|",
    ]
    for name in names:
        cells = [format(median(runs, name, get), fmt) for _, get, fmt in COLUMNS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    wall = [median(runs, n, lambda r: r.wall_s) for n in names]
    engine = [median(runs, n, lambda r: r.timings["engine"]) for n in names]
    cpu = [median(runs, n, lambda r: r.cpu_s) for n in names]
    command = " ".join(["/work/venv/bin/python -m benchmarks.ray_scaling", *sys.argv[1:]])
    lines += [
        "",
        "| ratio (same run) | 1 worker | 2 workers |",
        "|---|---|---|",
        f"| Ray / local, wall (Ray starts its own cluster) | {wall[2] / wall[0]:.2f} | "
        f"{wall[3] / wall[1]:.2f} |",
        f"| Ray / local, engine time (cluster up) | {engine[2] / engine[0]:.2f} | "
        f"{engine[3] / engine[1]:.2f} |",
        f"| Ray / local, CPU seconds (whole tree) | {cpu[2] / cpu[0]:.2f} | "
        f"{cpu[3] / cpu[1]:.2f} |",
        "",
        f"1 -> 2 workers, wall: local {wall[0] / wall[1]:.2f}x, Ray {wall[2] / wall[3]:.2f}x; "
        f"engine time: local {engine[0] / engine[1]:.2f}x, Ray {engine[2] / engine[3]:.2f}x.",
        "",
        f"`ray.init(num_cpus=2)` alone: import {rest['import_s']:.1f} s, init "
        f"{rest['init_s']:.1f} s; the idle cluster and its driver peak at "
        f"{rest['peak_tree_rss'] / MIB:.0f} MiB RSS.",
        "",
        f"Command: `{command}`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=HERE / "work" / "corpus-100")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--partition-size", default="16MB")
    parser.add_argument("--attempts", type=int, default=1)
    parser.add_argument("--patience", type=float, default=20.0)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "ray_scaling.md")
    args = parser.parse_args()
    if not args.corpus.is_dir():
        raise SystemExit(
            f"{args.corpus}: no corpus; build it with python -m benchmarks.corpus --size 100"
        )
    WORK.mkdir(parents=True, exist_ok=True)
    rest = at_rest()
    runs: list[Run] = []
    for rnd in range(args.rounds):
        order = CONTENDERS if rnd % 2 == 0 else CONTENDERS[::-1]
        for kind, workers in order:
            try:
                run = run_one(args.corpus, kind, workers, rnd, args)
            except RunFailed as exc:
                raise SystemExit(str(exc)) from None
            runs.append(run)
            print(
                f"round {rnd}: {run.name}: {run.wall_s:.1f} s wall, load {run.foreign_load:.2f}",
                flush=True,
            )
    text = report(runs, rest, args.corpus, args)
    args.out.write_text(text)
    args.out.with_suffix(".json").write_text(
        json.dumps({"at_rest": rest, "runs": [asdict(r) for r in runs]}, indent=1)
    )
    print(text)
    if len({tuple(r.shards) for r in runs}) != 1:
        raise SystemExit("shards differ between contenders")


if __name__ == "__main__":
    main()

"""One benchmark at two commits in the same run: is the head slower than the base?

    python -m benchmarks.compare_commits --base dfd99bd --head main --bench normalize_dedup
    python -m benchmarks.compare_commits --base dfd99bd --bench tokenize   # head: this checkout
    python -m benchmarks.compare_commits --head /work/wt/x --bench noop_prepare --rounds 9

Each commit's curate runs from its own tree (``PYTHONPATH=<tree>``, this interpreter; a
rev is exported with git archive, a path is used as it is), in alternating rounds (base
first in even rounds, head first in odd ones), so both sides see the same drift of a
shared machine. The workloads are the curate contenders of the existing benchmarks:

- normalize_dedup: ``curate run`` of benchmarks/contenders.py's recipe (NFC + exact dedup,
  2 workers, fsync) on benchmarks/corpus.py's corpus (--size MB, default 100);
- tokenize, tokenize_tekken: ``curate run`` of benchmarks/tokenize.py's recipe (Mistral 7B
  v1 SentencePiece or tekken, from the mistral-common wheel; 2 workers) on the same corpus;
- noop_prepare: benchmarks/noop_prepare.py's 1,000-shard version, built once per side,
  then per round a fresh process timing --calls (100) no-op ``prepare()`` calls; a
  round's figure is the median call;
- noop_run: the same version, built once per side, then per round one ``curate run`` of
  its recipe in a fresh process (the CLI's imports included), which finds it up to date
  and builds nothing: what a user waits for when nothing changed.

CPU seconds are user + system of the whole process tree (benchmarks/reaper.py), wall
seconds from its start to the last process's exit; the page cache holds the corpus and
dirty pages are flushed before each run, and one run a side before the rounds is not
counted (the first run after a while pays cold caches). It prints every round, the medians
per side, the ratios head / base, and the issue 15 targets (CPU <= 1.03x and wall <= 1.05x
for the builds, <= 1.1x for a no-op prepare); with --strict it exits 1 when a ratio misses
its target. The measured processes run at nice -10 (as benchmarks/measure.py runs
contenders), so other sessions disturb them less. The machine's other load during each run
(cores busy with other processes) is shown: when it is high, trust CPU over wall. Raw
rounds go to benchmarks/work/compare/<bench>-<base>-<head>.json.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from benchmarks import corpus as corpora
from benchmarks import noop_prepare
from benchmarks.contenders import Curate
from benchmarks.measure import machine_busy
from benchmarks.trees import CACHE, export, resolve_head, rev_parse

TREES = CACHE / "trees"

HERE = Path(__file__).resolve().parent
REAPER = HERE / "reaper.py"
PROBE = HERE / "compare_noop_probe.py"
WORK = HERE / "work" / "compare"
BENCHES = ("normalize_dedup", "tokenize", "tokenize_tekken", "noop_prepare", "noop_run")
TARGETS = {"cpu": 1.03, "wall": 1.05}
NOOP_TARGET = 1.10
NICE = -10
MISTRAL_FILES = {"tokenize": "tokenizer.model.v1", "tokenize_tekken": "tekken_240911.json"}


@dataclass
class Round:
    side: str
    round: int
    cpu_s: float
    wall_s: float
    other_load: float  # cores other processes kept busy during the run
    user_s: float = 0.0  # the parts of cpu_s (builds only): user time is the code's own
    sys_s: float = 0.0  # work; system time moves with the page cache and other sessions


@dataclass
class Side:
    name: str  # base or head
    label: str
    tree: Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="dfd99bd")
    parser.add_argument("--head", help="a tree (path) or a rev; default: this checkout")
    parser.add_argument("--bench", required=True, choices=BENCHES)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--size", type=int, default=100, help="corpus MB (builds)")
    parser.add_argument("--calls", type=int, default=100, help="no-op prepare() calls a round")
    parser.add_argument("--shards", type=int, default=1000, help="shards of the no-op version")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()

    base_sha = rev_parse(args.base)
    base = Side("base", f"{args.base} = {base_sha[:12]}", export(base_sha, TREES))
    head_tree, head_label = resolve_head(args.head, TREES)
    head = Side("head", head_label, head_tree)
    print(f"{args.bench}: base {base.label}, head {head.label}; {args.rounds} rounds", flush=True)
    for side in (base, head):
        compileall.compile_dir(side.tree / "curate", quiet=1)
    work = WORK / args.bench
    if args.bench == "noop_prepare":
        rounds = noop_rounds(args, base, head, work)
        unit = "ms (median call)"
    elif args.bench == "noop_run":
        rounds = noop_run_rounds(args, base, head, work)
        unit = "s"
    else:
        rounds = build_rounds(args, base, head, work)
        unit = "s"
    ok = report(args, base, head, rounds, unit)
    raw = WORK / f"{args.bench}-{base_sha[:12]}-{_slug(head.label)}.json"
    raw.write_text(json.dumps([asdict(r) for r in rounds], indent=1) + "\n")
    print(f"raw rounds: {raw}")
    if args.strict and not ok:
        sys.exit(1)


def _slug(label: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in label.split(" ")[-1].strip("()"))[:40]


# --- builds (normalize_dedup, tokenize) --------------------------------------------


def build_recipe(bench: str, info: corpora.CorpusInfo, out: Path) -> dict:
    if bench == "normalize_dedup":
        contender = Curate("curate", "", fsync=True, workers=2)
        recipe = yaml.safe_load(contender.recipe(info, out.parent))
    else:
        from benchmarks.tokenize_convert import mistral_file

        source = mistral_file(MISTRAL_FILES[bench])
        recipe = {  # benchmarks/tokenize.py's curate contender
            "name": "tok",
            "inputs": [str(info.folder / "*.jsonl")],
            "id_field": "id",
            "stages": [{"tokenize": {"source": str(source), "bos": False, "eos": True}}],
            "output": {"shard_size": "256MB", "rejected": False},
            "engine": {"kind": "local", "workers": 2},
        }
    recipe["output"]["root"] = str(out)
    return recipe


def build_rounds(args: argparse.Namespace, base: Side, head: Side, work: Path) -> list[Round]:
    info = corpora.build(args.size)
    rounds = []
    for r in range(-1, args.rounds):  # round -1: one run a side, not counted (cold caches)
        for side in (base, head) if r % 2 == 0 else (head, base):
            folder = work / side.name
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            recipe = folder / "recipe.yaml"
            recipe.write_text(yaml.safe_dump(build_recipe(args.bench, info, folder / "out")))
            warm(info)
            os.sync()
            run = measured(side, r, [_cli(), "run", "--quiet", str(recipe)], folder)
            print(describe(run) + ("  (warm-up, not counted)" if r < 0 else ""), flush=True)
            if r >= 0:
                rounds.append(run)
    return rounds


def warm(info: corpora.CorpusInfo) -> None:
    for name in info.files:
        with open(info.folder / name, "rb") as handle:
            while handle.read(8 << 20):
                pass


def env_for(side: Side) -> dict[str, str]:
    """This environment with the side's tree first on the path, caching bytecode as an
    installed curate would (sessions here export PYTHONDONTWRITEBYTECODE=1)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(side.tree)
    return env


def measured(side: Side, r: int, command: list[str], folder: Path) -> Round:
    result = folder / "rusage.json"
    log = folder / "stderr.log"
    busy = machine_busy()
    with open(log, "wb") as err:
        done = subprocess.run(
            [sys.executable, "-P", str(REAPER), str(result), "--", *command],
            env=env_for(side),
            cwd="/",
            stdout=subprocess.DEVNULL,
            stderr=err,
            **niced(NICE),
        )
    busy = machine_busy() - busy
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"{side.name}: {' '.join(command)} exited {done.returncode}:\n{tail}")
    usage = json.loads(result.read_text())
    cpu = usage["user_s"] + usage["sys_s"]
    other = max(0.0, busy - cpu) / usage["wall_s"]
    return Round(side.name, r, cpu, usage["wall_s"], other, usage["user_s"], usage["sys_s"])


def niced(nice: int) -> dict:
    """Popen arguments that run the measured process tree at this nice (root only; as
    benchmarks/measure.py does): in a session of its own, so that the kernel's autogroup,
    which ranks whole sessions, gets the nice too. Both sides get the same, so it only
    lowers the noise other sessions' work adds to a shared machine."""

    def renice() -> None:
        with contextlib.suppress(OSError):  # not root, or no autogroups: as it comes
            Path("/proc/self/autogroup").write_text(str(nice))
        with contextlib.suppress(OSError):
            os.nice(nice)

    return {"start_new_session": True, "preexec_fn": renice} if nice else {}


# --- no-op prepare -----------------------------------------------------------------


def built_versions(args: argparse.Namespace, base: Side, head: Side, work: Path) -> dict:
    """Each side's recipe of the many-shard version, built by that side's own curate (as a
    user's first call): the recipe per side name."""
    recipes = {}
    for side in (base, head):
        folder = work / side.name
        shutil.rmtree(folder, ignore_errors=True)
        recipes[side.name] = noop_prepare.build(folder, args.shards)
        print(f"building the {args.shards}-shard version with {side.name} ...", flush=True)
        subprocess.run(
            [_cli(), "run", "--quiet", str(recipes[side.name])],
            env=env_for(side),
            cwd="/",
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return recipes


def _cli() -> str:
    return str(Path(sys.executable).with_name("curate"))


def noop_run_rounds(args: argparse.Namespace, base: Side, head: Side, work: Path) -> list[Round]:
    """Per round and side, one `curate run` of the up-to-date recipe, through the reaper."""
    recipes = built_versions(args, base, head, work)
    rounds = []
    for r in range(-1, args.rounds):  # round -1: not counted (cold caches, bytecode)
        for side in (base, head) if r % 2 == 0 else (head, base):
            recipe = recipes[side.name]
            run = measured(side, r, [_cli(), "run", "--quiet", str(recipe)], recipe.parent)
            index = len(list((recipe.parent / "out").rglob("manifest.json")))
            if index != 1:
                raise SystemExit(f"{side.name}: the up-to-date run built a version ({index})")
            print(describe(run) + ("  (warm-up, not counted)" if r < 0 else ""), flush=True)
            if r >= 0:
                rounds.append(run)
    return rounds


def noop_rounds(args: argparse.Namespace, base: Side, head: Side, work: Path) -> list[Round]:
    recipes = built_versions(args, base, head, work)
    rounds = []
    for r in range(args.rounds):
        for side in (base, head) if r % 2 == 0 else (head, base):
            busy, started = machine_busy(), time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-P", str(PROBE), str(recipes[side.name]), str(args.calls)],
                env=env_for(side),
                cwd="/",
                capture_output=True,
                text=True,
                **niced(NICE),
            )
            if done.returncode != 0:
                raise SystemExit(f"{side.name}: the no-op prepare probe failed:\n{done.stderr}")
            busy, elapsed = machine_busy() - busy, time.perf_counter() - started
            timed = json.loads(done.stdout.strip().splitlines()[-1])
            cpu = statistics.median(timed["cpu_ms"])
            wall = statistics.median(timed["wall_ms"])
            other = max(0.0, busy - sum(timed["cpu_ms"]) / 1000) / elapsed
            rounds.append(Round(side.name, r, cpu, wall, other))
            print(describe(rounds[-1]), flush=True)
    return rounds


# --- report ------------------------------------------------------------------------


def describe(r: Round) -> str:
    parts = f" (user {r.user_s:.3f} + sys {r.sys_s:.3f})" if r.user_s else ""
    return (
        f"  r{r.round} {r.side}: cpu {r.cpu_s:8.3f}{parts}  wall {r.wall_s:8.3f}  "
        f"other load {r.other_load:4.2f} cores"
    )


def report(args, base: Side, head: Side, rounds: list[Round], unit: str) -> bool:
    """Print the medians and ratios; whether every ratio met its target.

    Beside the ratio of the medians (the issue's measure) it prints the median of the
    rounds' own head/base ratios (each round's pair ran back to back, so drift of the
    machine's load cancels) and how much the rounds of each side spread (interquartile
    range / median): a missed target inside that spread is noise until more rounds, a
    larger corpus or a quieter machine say otherwise.
    """
    by_side = {side.name: [r for r in rounds if r.side == side.name] for side in (base, head)}
    med = {
        name: {
            what: statistics.median(getattr(r, f"{what}_s") for r in runs)
            for what in ("cpu", "wall")
        }
        for name, runs in by_side.items()
    }
    load = statistics.median(r.other_load for r in rounds)
    print(f"\n{args.bench}, medians of {args.rounds} alternating rounds ({unit}):")
    print(f"  {'side':<6}{'CPU':>10}{'spread':>8}{'wall':>10}{'spread':>8}  tree")
    for side in (base, head):
        cpu, wall = med[side.name]["cpu"], med[side.name]["wall"]
        cpu_spread, wall_spread = (_spread(by_side[side.name], what) for what in ("cpu", "wall"))
        print(
            f"  {side.name:<6}{cpu:>10.3f}{cpu_spread:>7.0%} {wall:>10.3f}{wall_spread:>7.0%}  "
            f"{side.label}"
        )
    ok = True
    for what in ("cpu", "wall"):
        ratio = med["head"][what] / med["base"][what]
        paired = statistics.median(
            getattr(h, f"{what}_s") / getattr(b, f"{what}_s")
            for b, h in zip(by_side["base"], by_side["head"], strict=True)
        )
        target = NOOP_TARGET if args.bench.startswith("noop") else TARGETS[what]
        met = ratio <= target
        ok &= met
        verdict = "ok" if met else "MISSED"
        print(
            f"  head/base {what}: {ratio:.3f} (target <= {target:.2f}: {verdict}); "
            f"median of the rounds' ratios {paired:.3f}"
        )
    if all(r.user_s for r in rounds):  # builds: where a CPU gap is, the code's or the kernel's
        for what in ("user", "sys"):
            b, h = (statistics.median(getattr(r, f"{what}_s") for r in by_side[n]) for n in by_side)
            print(f"  head/base {what} CPU: {h / b:.3f} ({b:.3f} s -> {h:.3f} s, not a target)")
    print(f"  other load on the machine, median: {load:.2f} cores (high: trust CPU over wall)")
    return ok


def _spread(runs: list[Round], what: str) -> float:
    values = sorted(getattr(r, f"{what}_s") for r in runs)
    if len(values) < 4:
        return (values[-1] - values[0]) / statistics.median(values)
    q1, _, q3 = statistics.quantiles(values, n=4)
    return (q3 - q1) / statistics.median(values)


if __name__ == "__main__":
    main()

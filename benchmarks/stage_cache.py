"""The stage cache (issue 17): what a cold run costs with it, and what reruns save.

    python -m benchmarks.stage_cache                      # 300 MB, 6 rounds, the default
    python -m benchmarks.stage_cache --size 20 --rounds 2 --no-write   # smoke test

Corpus: benchmarks/corpus.py's (--size MB of man pages, docs and Python sources in files
of about 50 MB, 30% of its bytes exact copies). Recipe: the full pre-training recipe of
benchmarks/partition_parallelism.py (normalize, exact_dedup, minhash_dedup, pii, tokenize
with Mistral 7B's SentencePiece model from the mistral-common wheel, `threads: 1`, packed
into 4096-token rows), 2 workers, Arrow pools and RAYON_NUM_THREADS pinned to 1.

Before the rounds, from scratch (cache off, a fresh root each): the recipe with tekken
240911 in place of the SentencePiece model (R1: other ids, other vocabulary), R1 with the
MinHash threshold 0.7 instead of 0.8 (R2), and the recipe without tokenize, whose shards
(the post-PII text) are written into one Arrow file (post_pii.arrow). These builds are the
references every rerun is compared with, and the warm-up.

Each round, in one dataset root, each step changing one thing from the one before:
  cold      R0 with the cache on (the default) and R0 with `output.cache: false` in
            another fresh root, side by side (below): CPU and wall of each, and the
            cache's size on disk (<root>/<name>/.cache/stages) after the cold run;
  tokenizer R1 in the same root, and beside it (alternating order) a recipe of tokenize
            alone over post_pii.arrow in a fresh root, cache off: rerun wall / that wall;
  threshold R2 in the same root: MinHash signatures computed (the manifest's
            minhash_dedup counter or detail named signatures_computed; "unknown" when
            the tree does not count them) and rerun wall / the wall of R2 built from
            scratch alone (the reference);
  touch     every input's mtime set to now, bytes unchanged, then R2 again: whether a
            new version was built (it should not be) and the wall time, beside the time
            to hash the inputs (xxh3_128, one core) for scale.

`--only tokenizer` measures the tokenizer step alone, for more rounds in a short quiet
window: one cold run (cache on) fills the cache, its dataset folder is set aside, and each
round puts it back (untimed) before the tokenizer pair; only the tokenizer reference is
built, and results go to stage_cache-<size>-tokenizer.{md,json}.

Each pair runs in one order in even rounds and the other in odd ones, and the number of
rounds must be even, so each order counts as often: in the 5 rounds of 2026-12-04 the run
in second place of a pair cost 10-30% more than in first place (the tokenizer rerun over
tokenize alone: 1.40, 1.30, 1.21 with tokenize alone first, 1.11, 1.06 with the rerun
first), and with an odd count the median carried the bias of the order that ran once
more. A ratio is reported as the median of the rounds' paired ratios and, beside it, the
geometric mean of each order's ratios. Not the previous run's dirty pages: every run was
synced before already (sync(2) returns with Dirty and Writeback at 0, 800 MB just written
or not), and two identical runs back to back cost the same CPU (tokenize alone, 20 MB, 6
pairs: second / first 0.99). Before each run the dirty pages are still written (os.sync,
then waiting until /proc/meminfo's Dirty and Writeback drain: `--only tokenizer` copies a
dataset folder just before), and each run records what was left and its system CPU apart.

The cold pair runs side by side by default (`--cold side-by-side`): both runs at once, each
process tree pinned to a core of its own (sched_setaffinity, inherited by the workers),
which run gets core 0 swapped every round. This machine's speed drifts: the same build from
scratch cost 119.8 CPU-s as a reference and 127.9-170.3 CPU-s as cold_off in the rounds
that followed (2026-12-04, foreign load <= 0.02, no steal), and of six pairs run one after
the other the run in second place cost more in five, so their ratios spread from 0.91 to
1.24 around an effect of a few percent. Side by side, both runs see the same moments of
the machine: at 50 MB the two runs of a pair agreed within 2% while the rounds differed by
13%. Each run then shares the machine with the other, so its CPU-seconds are higher than
alone (about 25% on this machine) and its wall time is that of one core; both sides pay
alike, and the ratio is what the figure is about. `--cold one-after-the-other` runs the
pair in turn as before, each run alone with both cores.

Every version a step publishes is compared file by file with the reference build of the
same recipe (the cold cache-on run with the cache-off one): shards, rejected/,
quarantine/, state and info files byte for byte, manifests as JSON without time, host and
the keys benchmarks/stage_cache_outputs.py lists (the version's name, the recipe's path,
the cache setting, touched mtimes). Any difference is printed and the script exits 1.

Until `output.cache` exists in the tree under test (issue 17's store lands it), both cold
runs leave the key out and the results say so. Each run waits up to --patience seconds for
a second with at most --max-load cores of other load, runs at nice -10 in a session of its
own under benchmarks/reaper.py (CPU of the whole tree), and records the foreign load
(cores other processes kept busy). Results: benchmarks/results/stage_cache-<size>.{md,json}.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import corpus as corpora
from benchmarks import stage_cache_outputs as outputs
from benchmarks.compare_commits import niced
from benchmarks.measure import machine_busy, own_cpu
from benchmarks.partition_parallelism import (
    pinned_env,
    prepare,
    pretrain_recipe,
    wait_for_quiet,
)
from benchmarks.results_file import save_results
from benchmarks.tokenize_convert import mistral_file

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORK = HERE / "work" / "stage_cache"
NICE = -10
NAME = "pretrain"
SECOND_TOKENIZER = "tekken_240911.json"
THRESHOLDS = (0.8, 0.7)
TARGETS = {"cold_cpu": 1.10, "tokenizer_wall": 1.2}


@dataclass
class Run:
    round: int
    step: str
    wall_s: float
    cpu_s: float
    foreign_load: float
    version: str
    new_version: bool
    cache_bytes: int = 0
    cache_disk_bytes: int = 0
    signatures: int | None = None
    minhash_ran: int | None = None  # partitions whose signatures were computed (cache record)
    minhash_reused: int | None = None  # partitions whose signatures were read from the cache
    cache_said: dict[str, Any] = field(default_factory=dict)
    differences: int = 0
    summary: str = ""  # what `curate run` printed (per stage: ran or reused, once it says)
    sys_s: float = 0.0  # the system part of cpu_s
    dirty_mb: float = 0.0  # Dirty + Writeback in /proc/meminfo when the run started


# --- recipes ---------------------------------------------------------------------------


def recipe(
    files: list[Path], tokenizer: str | None, threshold: float, cache: bool, has_cache: bool
) -> dict[str, Any]:
    """The pre-training recipe over files, its output in `out` beside the recipe file (so
    every build's manifest names the same root); tokenizer: a mistral-common file name, or
    None for no tokenize stage. cache False writes `output.cache: false` when the tree
    has that key; True leaves the default."""
    r = pretrain_recipe(files[0], Path("out"), workers=2, partition_size=None)
    r["name"] = NAME
    r["inputs"] = [str(f) for f in files]
    r["output"] = {"root": "out"}
    if not cache and has_cache:
        r["output"]["cache"] = False
    stages = r["stages"]
    stages[2]["minhash_dedup"] = {"threshold": threshold}
    if tokenizer is None:
        r["stages"] = [s for s in stages if "tokenize" not in s]
    else:
        stages[4]["tokenize"]["source"] = str(mistral_file(tokenizer))
    return r


def tokenize_only(source: Path, tokenizer: str, has_cache: bool) -> dict[str, Any]:
    """tokenize alone (the same parameters) over the materialized post-PII text."""
    full = recipe([source], tokenizer, THRESHOLDS[0], cache=False, has_cache=has_cache)
    full["stages"] = [s for s in full["stages"] if "tokenize" in s]
    return full


def tree_has_cache_option(tree: Path) -> bool:
    """Whether the tree under test's recipe has `output.cache` (issue 17's store)."""
    probe = "from curate.recipe import OutputSpec; print('cache' in OutputSpec.model_fields)"
    done = subprocess.run(
        [sys.executable, "-c", probe], env=pinned_env(tree), capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    return done.stdout.strip() == "True"


# --- one run ---------------------------------------------------------------------------


@dataclass
class Started:
    """A `curate run` under the reaper, launched and not yet collected."""

    proc: subprocess.Popen[bytes]
    step: str
    rnd: int
    folder: Path
    dataset: Path
    before: set[str]
    dirty: int


def launch(
    r: dict[str, Any], folder: Path, step: str, rnd: int, args: argparse.Namespace,
    fresh: bool, dirty: int, cpu: int | None = None,
) -> Started:  # fmt: skip
    """Start one `curate run` of r in folder (emptied first when fresh) under the reaper,
    its whole process tree on core `cpu` when given (children inherit the affinity);
    `dirty`: the dirty bytes `ready` left, recorded with the run."""
    if fresh:
        shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "recipe.yaml"
    path.write_text(json.dumps(r, indent=1))  # JSON is YAML
    dataset = folder / "out" / NAME
    cli = str(Path(sys.executable).with_name("curate"))
    result = folder / f"{step}.rusage.json"
    popen = niced(NICE)
    renice = popen.get("preexec_fn")

    def prepare_child() -> None:
        if renice is not None:
            renice()
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})

    popen["preexec_fn"] = prepare_child
    with open(folder / f"{step}.stdout", "wb") as out, open(folder / f"{step}.log", "wb") as err:
        proc = subprocess.Popen(  # the child holds its own copies of both files
            [sys.executable, "-P", str(HERE / "reaper.py"), str(result), "--", cli, "run",
             str(path)],
            env=pinned_env(args.tree), cwd="/", stdout=out, stderr=err, **popen,
        )  # fmt: skip
    return Started(proc, step, rnd, folder, dataset, set(versions(dataset)), dirty)


def collect(started: Started) -> tuple[Run, Path]:
    """Wait for a launched run: its measurement (foreign load left at 0 for the caller)
    and the folder of the version it returned."""
    s = started
    s.proc.wait()
    log = s.folder / f"{s.step}.log"
    if s.proc.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(
            f"curate run {s.folder / 'recipe.yaml'} exited {s.proc.returncode}:\n{tail}"
        )
    usage = json.loads((s.folder / f"{s.step}.rusage.json").read_text())
    cpu = usage["user_s"] + usage["sys_s"]
    latest = (s.dataset / "LATEST").read_text().strip()
    manifest = json.loads((s.dataset / latest / "manifest.json").read_text())
    apparent, disk = outputs.cache_usage(s.dataset / ".cache" / "stages")
    basis = outputs.minhash_basis(manifest)
    measured = Run(
        round=s.rnd,
        step=s.step,
        wall_s=round(usage["wall_s"], 3),
        cpu_s=round(cpu, 3),
        foreign_load=0.0,
        version=latest,
        new_version=latest not in s.before,
        cache_bytes=apparent,
        cache_disk_bytes=disk,
        signatures=outputs.signatures_computed(manifest),
        minhash_ran=None if basis is None else basis[0],
        minhash_reused=None if basis is None else basis[1],
        cache_said=outputs.stage_outcomes(manifest),
        summary=(s.folder / f"{s.step}.stdout").read_text(errors="replace")[-4000:],
        sys_s=round(usage["sys_s"], 3),
        dirty_mb=round(s.dirty / 1e6, 1),
    )
    return measured, s.dataset / latest


def ready(r: dict[str, Any], args: argparse.Namespace) -> int:
    """Inputs in the page cache, dirty pages written, the machine quiet: the dirty bytes
    left when the run starts."""
    for name in r["inputs"]:
        warm(Path(name))
    settle()
    wait_for_quiet(args.max_load, args.patience)
    return dirty_bytes()


def run(
    r: dict[str, Any], folder: Path, step: str, rnd: int, args: argparse.Namespace, fresh: bool
) -> tuple[Run, Path]:
    """One `curate run` of r in folder (emptied first when fresh) under the reaper, alone:
    the measurement and the folder of the version it returned."""
    dirty = ready(r, args)
    own, busy = own_cpu(), machine_busy()
    measured, version = collect(launch(r, folder, step, rnd, args, fresh, dirty))
    busy, own = machine_busy() - busy, own_cpu() - own
    foreign = max(0.0, busy - own - measured.cpu_s) / measured.wall_s
    measured.foreign_load = round(foreign, 3)
    return measured, version


def run_side_by_side(
    pair: list[tuple[str, dict[str, Any], Path]], rnd: int, args: argparse.Namespace
) -> list[tuple[Run, Path]]:
    """Two runs at once, each from scratch with its whole tree on a core of its own (the
    first on core 0; the caller swaps them every round): both see the same moments of the
    machine, so its drift (the same build cost 120 to 170 CPU-s within an hour, run after
    run) falls on both alike. The foreign load is what neither tree nor this process used,
    over the longer run's wall."""
    dirty = ready(pair[0][1], args)
    own, busy = own_cpu(), machine_busy()
    started = [
        launch(r, folder, step, rnd, args, fresh=True, dirty=dirty, cpu=core)
        for core, (step, r, folder) in enumerate(pair)
    ]
    done = [collect(s) for s in started]
    busy, own = machine_busy() - busy, own_cpu() - own
    wall = max(m.wall_s for m, _ in done)
    foreign = max(0.0, busy - own - sum(m.cpu_s for m, _ in done)) / wall
    for m, _ in done:
        m.foreign_load = round(foreign, 3)
    return done


def dirty_bytes() -> int:
    """Bytes of the page cache waiting to be written or being written (Dirty + Writeback)."""
    total = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("Dirty", "Writeback"):
            total += int(value.split()[0]) * 1024
    return total


def settle(limit: int = 16 << 20, patience_s: float = 30.0) -> int:
    """Write every dirty page (the previous run's shards and cache entries, a copied
    dataset folder) before a run starts, so the kernel does not write them back while it
    runs; what is left after waiting (other sessions keep writing). sync(2) returns once
    the pages it found are written; Writeback is checked too for what others started."""
    os.sync()
    deadline = time.monotonic() + patience_s
    while (left := dirty_bytes()) > limit and time.monotonic() < deadline:
        time.sleep(0.2)
        os.sync()
    return left


def versions(dataset: Path) -> list[str]:
    if not dataset.is_dir():
        return []
    return [p.name for p in dataset.iterdir() if p.is_dir() and p.name[1:].isdigit()]


def warm(path: Path) -> None:
    """An input into the page cache (without touching its atime or mtime)."""
    with open(path, "rb") as handle:
        while handle.read(8 << 20):
            pass


def check(rerun: Path, scratch: Path, label: str, touched: bool = False) -> int:
    """Compare and print; the number of differences."""
    problems = outputs.compare_versions(rerun, scratch, touched)
    if problems:
        print(f"  DIFFERENT {label}: {rerun} against {scratch}", flush=True)
        for line in problems[:30]:
            print(f"      {line}", flush=True)
        if len(problems) > 30:
            print(f"      ... and {len(problems) - 30} more", flush=True)
    else:
        print(f"  identical {label}: {len(outputs.files_under(rerun))} files", flush=True)
    return len(problems)


def hash_seconds(files: list[Path]) -> float:
    """Seconds to hash every input (xxh3_128, this process, one core, page cache warm)."""
    import xxhash

    for f in files:
        warm(f)
    started = time.perf_counter()
    for f in files:
        h = xxhash.xxh3_128()
        with open(f, "rb") as handle:
            while chunk := handle.read(8 << 20):
                h.update(chunk)
    return time.perf_counter() - started


# --- the rounds ------------------------------------------------------------------------


@dataclass
class Setup:
    files: list[Path]
    has_cache: bool
    r0: dict[str, Any]
    r0_off: dict[str, Any]
    r1: dict[str, Any]
    r2: dict[str, Any]
    tok_only: dict[str, Any]
    refs: dict[str, Path]


def references(files: list[Path], args: argparse.Namespace) -> tuple[Setup, list[Run]]:
    """The recipes, and the from-scratch builds every rerun is compared with."""
    has = tree_has_cache_option(args.tree)
    sp, tk = "tokenizer.model.v1", SECOND_TOKENIZER
    r0 = recipe(files, sp, THRESHOLDS[0], cache=True, has_cache=has)
    r0_off = recipe(files, sp, THRESHOLDS[0], cache=False, has_cache=has)
    r1 = recipe(files, tk, THRESHOLDS[0], cache=True, has_cache=has)
    r2 = recipe(files, tk, THRESHOLDS[1], cache=True, has_cache=has)
    post_pii = WORK / "post_pii.arrow"
    setup = Setup(files, has, r0, r0_off, r1, r2, tokenize_only(post_pii, tk, has), {})
    runs = []
    refs = [
        ("ref_tokenizer", r1),
        ("ref_threshold", r2),
        ("ref_post_pii", recipe(files, None, THRESHOLDS[0], cache=True, has_cache=has)),
    ]
    if args.only == "tokenizer":
        refs = [refs[0], refs[2]]
    for step, r in refs:
        off = copy.deepcopy(r)
        if has:
            off["output"]["cache"] = False
        measured, version = run(off, WORK / step, step, -1, args, fresh=True)
        runs.append(measured)
        setup.refs[step] = version
        print(describe(measured), flush=True)
    rows = outputs.materialize(setup.refs["ref_post_pii"], post_pii)
    print(f"  {post_pii}: {rows} rows, {post_pii.stat().st_size / 1e6:.1f} MB", flush=True)
    return setup, runs


def one_round(rnd: int, s: Setup, args: argparse.Namespace) -> tuple[list[Run], int]:
    """The four steps of a round: its runs and the number of byte differences found."""
    dataset, off_root, tok_root = WORK / "dataset", WORK / "cold_off", WORK / "tokenize_only"
    runs: dict[str, Run] = {}
    versions_of: dict[str, Path] = {}
    differences = 0

    def do(step: str, r: dict[str, Any], folder: Path, fresh: bool) -> None:
        runs[step], versions_of[step] = run(r, folder, step, rnd, args, fresh)
        print(describe(runs[step]), flush=True)

    cold = [("cold_off", s.r0_off, off_root), ("cold_on", s.r0, dataset)]
    if args.cold == "side-by-side":
        for m, version in run_side_by_side(cold if rnd % 2 == 0 else cold[::-1], rnd, args):
            runs[m.step], versions_of[m.step] = m, version
            print(describe(m), flush=True)
    else:
        for step, r, folder in cold if rnd % 2 == 0 else cold[::-1]:
            do(step, r, folder, fresh=True)
    differences += tally(runs["cold_on"], check(
        versions_of["cold_on"], versions_of["cold_off"], "cold run, cache on / off"))  # fmt: skip
    tok = [("tokenize_only", s.tok_only, tok_root, True), ("tokenizer", s.r1, dataset, False)]
    for step, r, folder, fresh in tok if rnd % 2 == 0 else tok[::-1]:
        do(step, r, folder, fresh)
    differences += tally(runs["tokenizer"], check(
        versions_of["tokenizer"], s.refs["ref_tokenizer"], "tokenizer changed"))  # fmt: skip
    do("threshold", s.r2, dataset, fresh=False)
    differences += tally(runs["threshold"], check(
        versions_of["threshold"], s.refs["ref_threshold"], "threshold changed"))  # fmt: skip
    stat = {f: f.stat() for f in s.files}
    now = time.time_ns()
    for f in s.files:
        os.utime(f, ns=(now, now))
    do("touch", s.r2, dataset, fresh=False)
    for f, st in stat.items():  # as the references saw them, for the next round
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    if runs["touch"].new_version:
        differences += tally(runs["touch"], check(
            versions_of["touch"], s.refs["ref_threshold"], "inputs touched (rebuilt)",
            touched=True))  # fmt: skip
    elif runs["touch"].version != runs["threshold"].version:
        print("  DIFFERENT: touching returned another existing version", flush=True)
        differences += tally(runs["touch"], 1)
    for folder in (off_root, tok_root):
        shutil.rmtree(folder, ignore_errors=True)
    return list(runs.values()), differences


def tokenizer_round(rnd: int, s: Setup, args: argparse.Namespace) -> tuple[list[Run], int]:
    """`--only tokenizer`: the tokenizer pair, from the cold run's dataset folder as it was."""
    dataset, tok_root = WORK / "dataset", WORK / "tokenize_only"
    kept = WORK / "dataset-after-cold"
    found: list[Run] = []
    if rnd == 0:
        measured, _ = run(s.r0, dataset, "cold_on", -1, args, fresh=True)
        print(describe(measured), flush=True)
        found.append(measured)
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(dataset, kept, symlinks=True)
    shutil.rmtree(dataset, ignore_errors=True)
    shutil.copytree(kept, dataset, symlinks=True)
    runs: dict[str, Run] = {}
    versions_of: dict[str, Path] = {}
    tok = [("tokenize_only", s.tok_only, tok_root, True), ("tokenizer", s.r1, dataset, False)]
    for step, r, folder, fresh in tok if rnd % 2 == 0 else tok[::-1]:
        runs[step], versions_of[step] = run(r, folder, step, rnd, args, fresh)
        print(describe(runs[step]), flush=True)
    differences = tally(runs["tokenizer"], check(
        versions_of["tokenizer"], s.refs["ref_tokenizer"], "tokenizer changed"))  # fmt: skip
    shutil.rmtree(tok_root, ignore_errors=True)
    return found + list(runs.values()), differences


def tally(r: Run, n: int) -> int:
    r.differences += n
    return n


def describe(r: Run) -> str:
    extra = ""
    if r.cache_bytes:
        extra += f"  cache {r.cache_bytes / 1e6:.1f} MB"
    if r.step == "threshold" or r.step == "cold_on":
        extra += f"  signatures {'unknown' if r.signatures is None else r.signatures}"
        if r.minhash_ran is not None:
            extra += f" (computed for {r.minhash_ran} partitions, read for {r.minhash_reused})"
    if r.cache_said:
        said = json.dumps(r.cache_said, separators=(",", ":"))
        extra += f"\n      cache: {said if len(said) < 300 else said[:297] + '...'}"
    return (
        f"  r{r.round} {r.step:14s} wall {r.wall_s:8.2f} s  CPU {r.cpu_s:8.2f} s  "
        f"{r.version}{' (new)' if r.new_version else ' (existing)'}  "
        f"foreign load {r.foreign_load:4.2f}{extra}"
    )


# --- verdict and report ----------------------------------------------------------------


def verdict(runs: list[Run], s: Setup, hash_s: float, side_by_side: bool) -> list[str]:
    """Medians of the rounds against the issue's targets, as report lines."""
    by: dict[str, list[Run]] = {}
    for r in runs:
        if r.round >= 0:
            by.setdefault(r.step, []).append(r)
    rounds = sorted({r.round for r in runs if r.round >= 0})

    def one(step: str, rnd: int) -> Run:
        return next(r for r in by[step] if r.round == rnd)

    def med(values: list[float]) -> float:
        return statistics.median(values)

    load = max(r.foreign_load for r in runs if r.round >= 0)

    def ratio(a: str, b: str, what: str) -> Paired:
        return paired({i: getattr(one(a, i), what) / getattr(one(b, i), what) for i in rounds})

    tok, tok_cpu = (
        ratio("tokenizer", "tokenize_only", "wall_s"),
        ratio("tokenizer", "tokenize_only", "cpu_s"),
    )

    def m(step: str, what: str) -> float:
        return med([getattr(r, what) for r in by[step]])

    def ok(met: bool) -> str:
        return "ok" if met else "MISSED"

    tok_line = (
        f"tokenizer changed: rerun wall {m('tokenizer', 'wall_s'):.2f} s, tokenize alone on the "
        f"post-PII data {m('tokenize_only', 'wall_s'):.2f} s; rerun / alone {tok.median:.3f} "
        f"(median of {len(rounds)} paired rounds; target <= {TARGETS['tokenizer_wall']}: "
        f"{ok(tok.median <= TARGETS['tokenizer_wall'])}; {tok.by_order('alone', 'rerun')}); "
        f"CPU rerun / alone {tok_cpu.median:.3f} ({tok_cpu.by_order('alone', 'rerun')})"
    )
    if "cold_off" not in by:  # --only tokenizer
        pairs = ", ".join(
            f"{one('tokenizer', i).wall_s / one('tokenize_only', i).wall_s:.3f}" for i in rounds
        )
        return [tok_line, f"rerun / alone by round: {pairs}", dirty_line(runs),
                f"foreign load, worst run: {load:.2f} cores"]  # fmt: skip
    cold_cpu, cold_wall = (
        ratio("cold_on", "cold_off", "cpu_s"),
        ratio("cold_on", "cold_off", "wall_s"),
    )
    # against the same recipe built from scratch, alone (the cold pair ran side by side,
    # on a core each, so its walls are not a lone run's)
    scratch = next(r for r in runs if r.step == "ref_threshold")
    thr = med([one("threshold", i).wall_s for i in rounds]) / scratch.wall_s
    sigs = {one("threshold", i).signatures for i in rounds}
    ran = {one("threshold", i).minhash_ran for i in rounds}
    reused = {one("threshold", i).minhash_reused for i in rounds}
    sig_text = "unknown (the tree does not count them)" if None in sigs else str(sorted(sigs))
    if None not in ran:
        sig_text += (
            f"; the minhash_dedup cache record: signatures computed for {sorted(ran)} "
            f"partitions, read from the cache for {sorted(reused)}"
        )
    no_signatures = sigs == {0} or (None in sigs and ran == {0})
    rebuilt = sum(one("touch", i).new_version for i in rounds)
    cache = med([float(one("cold_on", i).cache_bytes) for i in rounds])
    cache_disk = med([float(one("cold_on", i).cache_disk_bytes) for i in rounds])

    without = "NO: both cold runs ran without the key, i.e. alike"
    cold_orders = ("off on core 0", "on on core 0") if side_by_side else ("off", "on")
    how = (
        "side by side, one core each, cores swapped every round"
        if side_by_side
        else "one after the other, the order swapped every round"
    )
    lines = [
        f"output.cache in the tree: {'yes' if s.has_cache else without}",
        f"cold run: cache on CPU {m('cold_on', 'cpu_s'):.2f} s wall "
        f"{m('cold_on', 'wall_s'):.2f} s; cache off CPU {m('cold_off', 'cpu_s'):.2f} s wall "
        f"{m('cold_off', 'wall_s'):.2f} s",
        f"cold CPU on / off ({how}): {cold_cpu.median:.3f} (median of {len(rounds)} paired rounds; "
        f"target <= {TARGETS['cold_cpu']}: {ok(cold_cpu.median <= TARGETS['cold_cpu'])}; "
        f"{cold_cpu.by_order(*cold_orders)}); wall on / off {cold_wall.median:.3f} "
        f"({cold_wall.by_order(*cold_orders)})",
        f"cache on disk after the cold run: {cache / 1e6:.1f} MB ({cache_disk / 1e6:.1f} MB "
        f"allocated)",
        tok_line,
        f"threshold changed: signatures computed {sig_text} (target 0: "
        f"{ok(no_signatures)}); rerun wall {m('threshold', 'wall_s'):.2f} s, "
        f"{thr:.3f}x the same recipe built from scratch ({scratch.wall_s:.2f} s, before the "
        "rounds)",
        f"inputs touched: {rebuilt} of {len(rounds)} reruns built a new version (target 0: "
        f"{ok(rebuilt == 0)}); wall {m('touch', 'wall_s'):.2f} s (hashing every input, one "
        f"core: {hash_s:.3f} s)",
        dirty_line(runs),
        f"foreign load, worst run: {load:.2f} cores",
    ]
    return lines


def dirty_line(runs: list[Run]) -> str:
    worst = max(runs, key=lambda r: r.dirty_mb)
    return (
        f"dirty pages when a run started (after os.sync and waiting), worst: {worst.dirty_mb:.1f}"
        f" MB ({worst.step}, round {worst.round})"
    )


@dataclass
class Paired:
    """A ratio of a pair's two runs: the median over the rounds, and the geometric mean over
    the rounds of each order (`one_round` runs cold_off and tokenize alone first in even
    rounds, cold_on and the tokenizer rerun first in odd ones)."""

    median: float
    even: float  # geometric mean over even rounds
    odd: float  # over odd rounds

    def by_order(self, even_first: str, odd_first: str) -> str:
        both = math.sqrt(self.even * self.odd)
        return (
            f"{even_first} first {self.even:.3f}, {odd_first} first {self.odd:.3f} (geometric "
            f"means; both orders {both:.3f})"
        )


def paired(ratios: dict[int, float]) -> Paired:
    """Per-round ratios (round -> ratio) summarized; an order with no round reads nan."""

    def geo(values: list[float]) -> float:
        return math.exp(statistics.fmean(math.log(v) for v in values)) if values else math.nan

    return Paired(
        median=statistics.median(ratios.values()),
        even=geo([v for i, v in ratios.items() if i % 2 == 0]),
        odd=geo([v for i, v in ratios.items() if i % 2 == 1]),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=300, help="corpus MB")
    parser.add_argument("--rounds", type=int, default=6, help="paired rounds (even)")
    parser.add_argument("--tree", type=Path, default=REPO, help="the curate checkout to run")
    parser.add_argument("--max-load", type=float, default=0.1, help="cores, before each run")
    parser.add_argument("--patience", type=float, default=10.0, help="seconds to wait for it")
    parser.add_argument("--tree-label", help="what --tree is, when it is not a git checkout")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--only", choices=["tokenizer"], help="measure one step alone")
    parser.add_argument(
        "--cold", choices=["side-by-side", "one-after-the-other"], default="side-by-side",
        help="how the cold pair runs: at once, one core each (the default), or in turn",
    )  # fmt: skip
    args = parser.parse_args()
    if args.rounds < 2 or args.rounds % 2:
        parser.error("--rounds must be even (and at least 2): each order of a pair runs as often")

    info = corpora.build(args.size)
    files = [info.folder / name for name in info.files]
    prepare(args.tree)
    commit = args.tree_label or git(args.tree, "rev-parse", "--short", "HEAD")
    print(f"{info.folder}: {info.describe()}", flush=True)
    print(f"tree {args.tree} at {commit}", flush=True)
    setup, runs = references(files, args)
    if not setup.has_cache:
        print("  (no output.cache in this tree: both cold runs leave the key out)", flush=True)
    differences = 0
    for rnd in range(args.rounds):
        one = tokenizer_round if args.only == "tokenizer" else one_round
        found, diffs = one(rnd, setup, args)
        runs += found
        differences += diffs
    hashing = hash_seconds(files) if not args.only else 0.0
    lines = verdict(runs, setup, hashing, args.cold == "side-by-side")
    if differences:
        lines.append(f"BYTE COMPARISON FAILED: {differences} difference(s), see the log")
    else:
        lines.append("every version identical to its build from scratch")
    print("\n".join(lines), flush=True)
    if not args.no_write:
        write_results(args, info, commit, runs, lines)
    sys.exit(1 if differences else 0)


def git(tree: Path, *command: str) -> str:
    done = subprocess.run(["git", "-C", str(tree), *command], capture_output=True, text=True)
    return done.stdout.strip()


def write_results(
    args: argparse.Namespace, info: corpora.CorpusInfo, commit: str, runs: list[Run],
    lines: list[str],
) -> None:  # fmt: skip
    dirty = (
        " (with uncommitted changes)" if git(args.tree, "status", "--porcelain", "curate") else ""
    )
    command = "python -m benchmarks.stage_cache " + " ".join(sys.argv[1:])
    rows = [
        "| round | step | wall s | CPU s | sys s | version | cache MB | MinHash signatures "
        "| foreign | dirty MB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        sigs = ""
        if r.step in ("cold_on", "threshold"):
            sigs = "unknown" if r.signatures is None else str(r.signatures)
            if r.minhash_ran is not None:
                sigs += f" (partitions: {r.minhash_ran} computed, {r.minhash_reused} read)"
        rows.append(
            f"| {r.round if r.round >= 0 else 'ref'} | {r.step} | {r.wall_s:.2f} | "
            f"{r.cpu_s:.2f} | {r.sys_s:.2f} | {r.version}{' new' if r.new_version else ''} | "
            f"{r.cache_bytes / 1e6:.1f} | {sigs} | {r.foreign_load:.2f} | {r.dirty_mb:.1f} |"
        )
    save_results(
        f"stage_cache-{args.size}" + (f"-{args.only}" if args.only else ""),
        "Stage cache: cold cost and reruns (issue 17)",
        f"Corpus: {info.describe()}. Recipe: normalize, exact_dedup, minhash_dedup "
        "(threshold 0.8), pii, tokenize (Mistral 7B SentencePiece v1, `threads: 1`, packed "
        "4096), 2 workers, default partition_size; Arrow pools and RAYON_NUM_THREADS "
        f"pinned to 1. Reruns: tokenizer -> {SECOND_TOKENIZER}; then threshold -> "
        f"{THRESHOLDS[1]}; then every input touched. curate {commit}{dirty} ({args.tree}); ",
        rows,
        lines,
        command,
        runs,
    )


if __name__ == "__main__":
    main()

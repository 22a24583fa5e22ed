"""Incremental inputs (issue 18): a rerun after new files, against the new files alone.

    python -m benchmarks.incremental                      # 300 MB, 5 rounds, the default
    python -m benchmarks.incremental --size 20 --rounds 1 --no-write   # smoke test

Corpus: benchmarks/corpus.py's (--size MB of man pages, docs and Python sources, 30% of
its bytes exact copies of earlier documents) in files of about --file-mb MB (size / 10 by
default), so that the last file, about 10% of the bytes, is the new data and the others
the old. Recipe: benchmarks/stage_cache.py's R0 (normalize, exact_dedup, minhash_dedup,
pii, tokenize with Mistral 7B's SentencePiece model, packed 4096), 2 workers, Arrow pools
and RAYON_NUM_THREADS pinned to 1.

Before the rounds: the base, a version built from the old files with the stage cache on
(the default), its folder (recipe, dataset root, stage cache) then copied aside as it is;
and from scratch (cache off, a fresh root
each) the references every rerun is compared with: old + new with the new file last
(append) and with the new file first (insert).

Each round, for each case (append, insert): the base's folder put back where it was built
(`cp -a` of the copy: the version, its stage cache and .cache/digests.json; at the same
path, since a stage's cache identity holds the recipe's folder), then in alternating order
  rerun      the case's recipe (the old inputs plus the new file, last or first) in that
             folder, cache on: CPU and wall, each barrier's decision seconds from the new
             version's stage records, what each stage computed and took from the cache
             (partitions; a barrier's basis: documents too),
             and the new version's own bytes (files that share no inode with the base
             version's: what hard links did not share);
  new_alone  the recipe over the new file alone, from scratch (cache off, a fresh root):
             CPU and wall, and its version's bytes (the new data's output).
Every rerun's version is compared file by file with its reference (as stage_cache.py
compares: shards, rejected/, quarantine/, state and info files byte for byte, manifests
without time, host, version name, recipe path and cache keys); any difference is printed
and the script exits 1. Medians of the rounds: rerun / new_alone in CPU and wall (target
<= 2x), the decision steps' share of the rerun, own bytes / the new data's bytes.

Runs are measured by benchmarks/stage_cache.py's `run` (benchmarks/reaper.py's CPU of the
whole process tree, nice -10, waiting up to --patience s for at most --max-load cores of
other load, and recording the foreign load). Results: benchmarks/results/incremental-<size>,
rewritten after every round; --deadline HH:MM (UTC) starts no round that the previous
round's length would end past, and the results say how many rounds ran.
"""

from __future__ import annotations

import argparse
import calendar
import json
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import corpus as corpora
from benchmarks import incremental_outputs as outputs
from benchmarks import stage_cache
from benchmarks.partition_parallelism import prepare
from benchmarks.results_file import save_results

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORK = HERE / "work" / "incremental"
TOKENIZER = "tokenizer.model.v1"
THRESHOLD = 0.8
NEW_SHARE = 0.10
TARGET = 2.0
CASES = ("append", "insert")


@dataclass
class Step:
    round: int
    case: str  # append, insert, or "" for the base
    step: str  # base, ref, rerun, new_alone
    wall_s: float
    cpu_s: float
    foreign_load: float
    version: str
    new_version: bool
    decide_s: dict[str, float] = field(default_factory=dict)
    bytes: outputs.Bytes = field(default_factory=outputs.Bytes)
    work: dict[str, tuple[int, int]] = field(default_factory=dict)
    docs: dict[str, tuple[int, int]] = field(default_factory=dict)  # barrier bases, documents
    partitions: int = 0
    differences: int = 0

    @property
    def decide_total(self) -> float:
        return sum(self.decide_s.values())


# --- the corpus split and the recipes ----------------------------------------------------


def split_new(files: list[Path], share: float) -> tuple[list[Path], list[Path]]:
    """(old, new): new is the trailing files whose bytes come closest to `share` of all."""
    sizes = [f.stat().st_size for f in files]
    total = sum(sizes)
    best = min(range(1, len(files)), key=lambda k: abs(sum(sizes[-k:]) - share * total))
    return files[:-best], files[-best:]


def recipes(old: list[Path], new: list[Path], has_cache: bool) -> dict[str, dict[str, Any]]:
    def r(files: list[Path], cache: bool) -> dict[str, Any]:
        return stage_cache.recipe(files, TOKENIZER, THRESHOLD, cache=cache, has_cache=has_cache)

    return {
        "base": r(old, cache=True),
        "append": r(old + new, cache=True),
        "insert": r(new + old, cache=True),
        "ref_append": r(old + new, cache=False),
        "ref_insert": r(new + old, cache=False),
        "new_alone": r(new, cache=False),
    }


# --- one measured run -----------------------------------------------------------------------


def measure(
    r: dict[str, Any], folder: Path, step: str, case: str, rnd: int, args: argparse.Namespace,
    fresh: bool, earlier: Path | None = None,
) -> tuple[Step, Path]:  # fmt: skip
    """stage_cache.run, plus what the new version's manifest and files say."""
    ran, version = stage_cache.run(r, folder, f"{case or step}-{step}", rnd, args, fresh)
    manifest = outputs.manifest_of(version)
    measured = Step(
        round=rnd,
        case=case,
        step=step,
        wall_s=ran.wall_s,
        cpu_s=ran.cpu_s,
        foreign_load=ran.foreign_load,
        version=ran.version,
        new_version=ran.new_version,
        decide_s=outputs.decide_seconds(manifest),
        bytes=outputs.bytes_of(version, earlier),
        work=outputs.stage_work(manifest),
        docs=outputs.basis_docs(manifest),
        partitions=len(manifest.get("partitions", [])),
    )
    print(describe(measured), flush=True)
    return measured, version


def describe(s: Step) -> str:
    decide = ", ".join(f"{k} {v:.2f} s" for k, v in s.decide_s.items())
    b = s.bytes
    work = " ".join(f"{k} {ran}/{ran + reused}" for k, (ran, reused) in s.work.items())
    docs = " ".join(f"{k} {ran}/{ran + reused}" for k, (ran, reused) in s.docs.items())
    return (
        f"  r{s.round} {s.case or '-':6s} {s.step:9s} wall {s.wall_s:7.2f} s  CPU "
        f"{s.cpu_s:7.2f} s  {s.version}{' (new)' if s.new_version else ' (existing)'}  "
        f"foreign {s.foreign_load:4.2f}\n      decide: {decide or '-'}; bytes {b.total / 1e6:.1f}"
        f" MB, own {b.own / 1e6:.1f} MB (shards {b.own_shards / 1e6:.1f} of "
        f"{b.shards / 1e6:.1f} MB); partitions computed/all: {work or '-'}; barrier "
        f"bases, documents computed/all: {docs or '-'}"
    )


def copy_root(source: Path, dest: Path) -> None:
    """A folder as it is (versions, stage cache, digests, modes, times, hard links)."""
    shutil.rmtree(dest, ignore_errors=True)
    subprocess.run(["cp", "-a", "--reflink=auto", str(source), str(dest)], check=True)


# --- the rounds ----------------------------------------------------------------------------


def one_round(
    rnd: int, rs: dict[str, dict[str, Any]], refs: dict[str, Path], args: argparse.Namespace
) -> list[Step]:
    """Both cases of a round: the rerun and new_alone, in alternating order."""
    found = []
    for case in CASES:
        dest, alone = WORK / "dataset", WORK / "new_alone"
        copy_root(WORK / "base", dest)
        earlier = dest / "out" / stage_cache.NAME / "v1"
        steps: dict[str, Step] = {}
        version = None
        pair = [("rerun", rs[case], dest, False, earlier), ("new_alone", rs["new_alone"],
                alone, True, None)]  # fmt: skip
        for step, r, folder, fresh, before in pair if rnd % 2 == 0 else pair[::-1]:
            steps[step], v = measure(r, folder, step, case, rnd, args, fresh, before)
            if step == "rerun":
                version = v
        assert version is not None
        rerun = steps["rerun"]
        rerun.differences = stage_cache.check(version, refs[case], f"{case}: rerun / scratch")
        if not rerun.new_version or version.name != "v2":
            print(f"  DIFFERENT: the {case} rerun returned {version.name}, not a new v2")
            rerun.differences += 1
        found += [steps["rerun"], steps["new_alone"]]
        shutil.rmtree(alone, ignore_errors=True)
    return found


# --- verdict and report ---------------------------------------------------------------------


def verdict(steps: list[Step], old: list[Path], new: list[Path]) -> list[str]:
    med = statistics.median
    rounds = sorted({s.round for s in steps if s.round >= 0})

    def one(case: str, step: str, rnd: int) -> Step:
        return next(s for s in steps if (s.case, s.step, s.round) == (case, step, rnd))

    def ok(met: bool) -> str:
        return "ok" if met else "MISSED"

    old_b, new_b = sum(f.stat().st_size for f in old), sum(f.stat().st_size for f in new)
    base = next(s for s in steps if s.step == "base")
    every = {s.partitions for s in steps if s.step == "rerun"}
    added = {n - base.partitions for n in every}
    lines = [
        f"inputs: {len(old)} old files ({old_b / 1e6:.1f} MB), {len(new)} new "
        f"({', '.join(f.name for f in new)}, {new_b / 1e6:.1f} MB, "
        f"{new_b / (old_b + new_b):.1%} of the bytes); base version from the old files, "
        f"cache on: CPU {base.cpu_s:.2f} s, wall {base.wall_s:.2f} s; partitions: "
        f"{base.partitions} old, {sorted(added)} new, {sorted(every)} in all",
    ]
    for case in CASES:
        reruns = [one(case, "rerun", i) for i in rounds]
        alone = [one(case, "new_alone", i) for i in rounds]
        ref = next(s for s in steps if (s.case, s.step) == (case, "ref"))
        cpu = med([r.cpu_s / a.cpu_s for r, a in zip(reruns, alone, strict=True)])
        wall = med([r.wall_s / a.wall_s for r, a in zip(reruns, alone, strict=True)])
        decide = med([r.decide_total for r in reruns])
        per = {k: med([r.decide_s.get(k, 0.0) for r in reruns]) for k in reruns[0].decide_s}
        share_wall = med([r.decide_total / r.wall_s for r in reruns])
        share_cpu = med([r.decide_total / r.cpu_s for r in reruns])
        own = med([float(r.bytes.own) for r in reruns])
        own_shards = med([float(r.bytes.own_shards) for r in reruns])
        total = med([float(r.bytes.total) for r in reruns])
        new_out = med([float(a.bytes.total) for a in alone])
        new_shards = med([float(a.bytes.shards) for a in alone])
        work = sorted({json.dumps(r.work, sort_keys=True) for r in reruns})
        old_redone = max(ran for r in reruns for ran, _ in r.work.values()) - min(added)
        where = "last" if case == "append" else "first"
        lines += [
            f"{case} (the new file {where}): rerun CPU {med([r.cpu_s for r in reruns]):.2f} s, "
            f"wall {med([r.wall_s for r in reruns]):.2f} s; new files alone from scratch CPU "
            f"{med([a.cpu_s for a in alone]):.2f} s, wall {med([a.wall_s for a in alone]):.2f} "
            f"s; rerun / alone CPU {cpu:.3f}, wall {wall:.3f} (medians of paired rounds; "
            f"target <= {TARGET}: CPU {ok(cpu <= TARGET)}, wall {ok(wall <= TARGET)}); "
            f"old + new from scratch (the reference): CPU {ref.cpu_s:.2f} s, wall "
            f"{ref.wall_s:.2f} s",
            f"{case}: decision steps {decide:.2f} s ("
            + ", ".join(f"{k} {v:.2f} s" for k, v in per.items())
            + f"), {share_wall:.1%} of the rerun's wall, {share_cpu:.1%} of its CPU (medians)",
            f"{case}: new version {total / 1e6:.1f} MB, own (no inode shared with the base "
            f"version) {own / 1e6:.1f} MB, of which shards {own_shards / 1e6:.1f} MB; the new "
            f"data's output (new files alone) {new_out / 1e6:.1f} MB, shards "
            f"{new_shards / 1e6:.1f} MB; own / new data's {own / new_out:.3f} (shards "
            f"{own_shards / max(new_shards, 1):.3f})",
            f"{case}: partitions computed, read from the cache per stage (cache records): "
            + " | ".join(work)
            + f"; old partitions recomputed by some stage: {old_redone}",
            f"{case}: barrier bases, documents computed, read from the cache (cache records): "
            + " | ".join(sorted({json.dumps(r.docs, sort_keys=True) for r in reruns})),
        ]
    load = max(s.foreign_load for s in steps)
    lines.append(f"foreign load, worst run: {load:.2f} cores")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=300, help="corpus MB")
    parser.add_argument("--file-mb", type=int, help="corpus file MB (default size / 10)")
    parser.add_argument("--rounds", type=int, default=5, help="paired rounds")
    parser.add_argument("--tree", type=Path, default=REPO, help="the curate checkout to run")
    parser.add_argument("--max-load", type=float, default=0.1, help="cores, before each run")
    parser.add_argument("--patience", type=float, default=10.0, help="seconds to wait for it")
    parser.add_argument("--tree-label", help="what --tree is, when it is not a git checkout")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--deadline",
        help="HH:MM UTC today: start no round the previous one's length would end past",
    )
    args = parser.parse_args()

    info = corpora.build(args.size, file_mb=args.file_mb or max(1, args.size // 10))
    old, new = split_new([info.folder / name for name in info.files], NEW_SHARE)
    prepare(args.tree)
    commit = args.tree_label or stage_cache.git(args.tree, "rev-parse", "--short", "HEAD")
    print(f"{info.folder}: {info.describe()}", flush=True)
    print(f"tree {args.tree} at {commit}", flush=True)
    rs = recipes(old, new, stage_cache.tree_has_cache_option(args.tree))
    steps = [measure(rs["base"], WORK / "dataset", "base", "", -1, args, fresh=True)[0]]
    copy_root(WORK / "dataset", WORK / "base")
    refs = {}
    for case in CASES:
        ref, refs[case] = measure(rs[f"ref_{case}"], WORK / f"ref_{case}", "ref", case, -1, args,
                                  fresh=True)  # fmt: skip
        steps.append(ref)
    differences, deadline, lines = 0, until(args.deadline), []
    for rnd in range(args.rounds):
        started = time.time()
        found = one_round(rnd, rs, refs, args)
        steps += found
        differences += sum(s.differences for s in found)
        lines = verdict(steps, old, new)
        lines.append(f"rounds: {rnd + 1} of the {args.rounds} asked")
        if differences:
            lines.append(f"BYTE COMPARISON FAILED: {differences} difference(s), see the log")
        else:
            lines.append("every rerun's version identical to its build from scratch")
        if not args.no_write:  # after every round: a run stopped later still leaves these
            write_results(args, info, commit, steps, lines)
        if rnd + 1 < args.rounds and time.time() + (time.time() - started) > deadline:
            print(f"  stopping: another round would end past {args.deadline} UTC", flush=True)
            break
    print("\n".join(lines), flush=True)
    sys.exit(1 if differences else 0)


def until(hhmm: str | None) -> float:
    """The epoch seconds of HH:MM UTC today; infinity without one."""
    if hhmm is None:
        return float("inf")
    hours, minutes = (int(x) for x in hhmm.split(":"))
    now = time.gmtime()
    return calendar.timegm((now.tm_year, now.tm_mon, now.tm_mday, hours, minutes, 0))


def write_results(
    args: argparse.Namespace, info: corpora.CorpusInfo, commit: str, steps: list[Step],
    lines: list[str],
) -> None:  # fmt: skip
    dirty = stage_cache.git(args.tree, "status", "--porcelain", "curate")
    command = "python -m benchmarks.incremental " + " ".join(sys.argv[1:])
    rows = [
        "| round | case | step | wall s | CPU s | version | decide s | MB | own MB | computed "
        "(partitions per stage) | computed (barrier documents) | foreign |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in steps:
        rows.append(
            f"| {s.round if s.round >= 0 else 'setup'} | {s.case} | {s.step} | {s.wall_s:.2f} | "
            f"{s.cpu_s:.2f} | {s.version}{' new' if s.new_version else ''} | "
            f"{s.decide_total:.2f} | {s.bytes.total / 1e6:.1f} | {s.bytes.own / 1e6:.1f} | "
            f"{' '.join(f'{k} {ran}/{ran + old}' for k, (ran, old) in s.work.items())} | "
            f"{' '.join(f'{k} {ran}/{ran + old}' for k, (ran, old) in s.docs.items())} | "
            f"{s.foreign_load:.2f} |"
        )
    save_results(
        f"incremental-{args.size}",
        "Incremental inputs: a rerun after new files (issue 18)",
        f"Corpus: {info.describe()}. Recipe: normalize, exact_dedup, minhash_dedup "
        f"(threshold {THRESHOLD}), pii, tokenize (Mistral 7B SentencePiece v1, `threads: "
        "1`, packed 4096), 2 workers, default partition_size; Arrow pools and "
        "RAYON_NUM_THREADS pinned to 1. The base version is built once from the old "
        "files (cache on); each round puts its folder back as it was (a copy kept aside, "
        "restored at the same path) and reruns with the new file appended (last) or "
        "inserted (first), paired with the new file alone from "
        f"scratch (cache off). curate {commit}{' (with uncommitted changes)' if dirty else ''}"
        f" ({args.tree}); ",
        rows,
        lines,
        command,
        steps,
    )


if __name__ == "__main__":
    main()

"""Side-by-side benchmark: normalize (NFC) + exact dedup in curate and its peers.

Builds (or reuses) the corpora, then for each round and size runs every contender in
its own process, in alternating order, each on an empty scratch folder after the
page cache holds the corpus and dirty pages of the previous run are flushed. The
machine is shared: a run during which other processes kept more than
MAX_FOREIGN_LOAD cores busy is repeated (up to --attempts times; the quietest attempt
is kept and its foreign load reported), and each attempt first waits up to
--patience seconds for such a quiet second. After
every run it reads the output back and checks that all contenders kept the same
documents (and that their number equals the corpus's count of distinct texts).
Medians over rounds go to benchmarks/results/normalize_dedup.md (raw runs beside it,
as .json); it exits non-zero if any contender's documents differ.

Usage: python -m benchmarks.normalize_dedup --size 100 --size 400 --rounds 2
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from benchmarks import corpus, report
from benchmarks.contenders import (
    Contender,
    Curate,
    all_contenders,
    curate_folder,
    default_curate_executable,
    precompile,
)
from benchmarks.measure import MIB, run_measured, wait_for_quiet
from benchmarks.outputs import Digest

RESULTS = Path(__file__).resolve().parent / "results" / "normalize_dedup.md"
CHUNK = 8 << 20
MAX_FOREIGN_LOAD = 0.15


def warm(info: corpus.CorpusInfo) -> None:
    """Read the corpus once so every contender starts from the page cache."""
    for name in info.files:
        with open(info.folder / name, "rb") as handle:
            while handle.read(CHUNK):
                pass


def sha256_cost(paths: list[Path]) -> tuple[float, int]:
    """Seconds one core needs to sha256 these files, and their bytes."""
    start, total = time.perf_counter(), 0
    for path in paths:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            while chunk := handle.read(CHUNK):
                digest.update(chunk)
                total += len(chunk)
    return time.perf_counter() - start, total


def run_quiet(
    contender: Contender, info: corpus.CorpusInfo, work: Path, round_: int, args
) -> report.Run:
    """Run until other processes left the machine alone (or args.attempts runs were made)."""
    attempts: list[report.Run] = []
    while len(attempts) < args.attempts:
        wait_for_quiet(MAX_FOREIGN_LOAD, args.patience)
        attempts.append(run_one(contender, info, work, round_, args.nice))
        if attempts[-1].measurement.foreign_load <= MAX_FOREIGN_LOAD:
            break
        print(f"  (busy machine: {describe(attempts[-1])}; again)", flush=True)
    best = min(attempts, key=lambda run: run.measurement.foreign_load)
    best.attempts = len(attempts)
    return best


def run_one(
    contender: Contender, info: corpus.CorpusInfo, work: Path, round_: int, nice: int
) -> report.Run:
    contender.prepare(work)
    os.sync()
    logs = work / "logs"
    logs.mkdir(exist_ok=True)
    slug = contender.folder(work).name
    log = logs / f"{info.size_mb}-{slug}-r{round_}.log"
    command = contender.command(info, work)
    measurement = run_measured(command, log, env=contender.env(work), nice=nice)
    digest = contender.digest(work)
    run = report.Run(info.size_mb, contender.name, round_, measurement, digest)
    if isinstance(contender, Curate):
        run.checksum_s, run.written_bytes = sha256_cost(contender.shards(work))
    return run


def describe(run: report.Run) -> str:
    m = run.measurement
    return (
        f"{run.size_mb:>4} MB r{run.round} {run.contender:<22} wall {m.wall_s:6.2f} s  "
        f"cpu {m.cpu_s:6.2f} s  tree {m.peak_tree_rss / MIB:6.0f} MiB  "
        f"foreign {m.foreign_load:4.2f}  "
        f"docs {run.digest.docs}  {run.digest.documents}/{run.digest.order}"
    )


def check(
    runs: list[report.Run], corpora: dict[int, corpus.CorpusInfo]
) -> tuple[dict[int, Digest], bool]:
    """The reference digest per size (the floor's when it ran) and whether all agree.

    Besides agreeing with each other, every contender must keep as many documents as
    the corpus builder counted distinct normalized texts.
    """
    reference: dict[int, Digest] = {}
    for run in runs:
        if run.contender == "floor" or run.size_mb not in reference:
            reference[run.size_mb] = run.digest
    agree = True
    for run in runs:
        expected = corpora[run.size_mb].distinct_texts
        ref = reference[run.size_mb]
        if run.digest.docs != expected or run.digest.documents != ref.documents:
            print(f"MISMATCH: {describe(run)}; expected {expected} docs {ref.documents}")
            agree = False
    return reference, agree


def write_results(runs, corpora, reference, sizes, rounds, command, curate_exe) -> list[str]:
    summaries = report.summarize(runs, corpora)
    rows = report.table(summaries, reference)
    verdicts = report.targets(summaries, sizes)
    lines = [
        "# normalize + exact dedup: curate side by side",
        "",
        f"Generated by `{command}` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; "
        f"medians of {rounds} rounds, contenders alternating order each round. "
        "MB = 10^6 bytes of input JSONL; MB/s = input MB / wall seconds; CPU-s = user + "
        "system seconds of the whole process tree; peak tree RSS = the highest sum of RSS "
        "over the tree, sampled every 50 ms. Ratios are contender / curate (above 1: "
        "slower or bigger than curate).",
        "",
        "## Machine and versions",
        *report.machine(curate_exe),
        "",
        "## Corpora",
        *(
            f"- {size} MB (duplicate rate {corpora[size].dup_rate:.0%} of bytes as injected "
            f"exact copies with new ids): {corpora[size].describe()}"
            for size in sizes
        ),
        "",
        "## Results",
        *rows,
        "",
        report.noise(runs),
        "",
        "## Targets",
        "| target | measured | met |",
        "|---|---|---|",
        *(
            f"| {t.text} | {t.measured} | {'n/a' if t.met is None else 'yes' if t.met else 'NO'} |"
            for t in verdicts
        ),
        "",
        "## What curate pays that the floor does not",
        *(report.costs(summaries) or ["- curate was not measured."]),
        "",
        "See benchmarks/README.md for how each contender is configured.",
    ]
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text("\n".join(lines) + "\n")
    raw = [asdict(run) for run in runs]
    RESULTS.with_suffix(".json").write_text(json.dumps(raw, indent=1) + "\n")
    return rows + [""] + [f"{t.text}: {t.measured} -> {t.met}" for t in verdicts]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, action="append", help="corpus MB (100, 400)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", action="append", help="run only these contenders")
    parser.add_argument("--curate", default=default_curate_executable(), help="curate CLI")
    parser.add_argument("--attempts", type=int, default=2, help="runs of one when busy")
    parser.add_argument("--patience", type=float, default=20, help="seconds to wait for quiet")
    parser.add_argument("--nice", type=int, default=-10, help="contenders' nice (root)")
    args = parser.parse_args()
    sizes = sorted(args.size or [100, 400])
    corpora = {size: corpus.build(size) for size in sizes}
    contenders = [c for c in all_contenders(args.curate) if not args.only or c.name in args.only]
    work = corpus.WORK
    checkouts = [Path(__file__).resolve().parent]
    if any(isinstance(c, Curate) for c in contenders):
        checkouts.append(curate_folder(args.curate) / "curate")
    precompile(checkouts)
    runs: list[report.Run] = []
    for round_ in range(args.rounds):
        order = contenders if round_ % 2 == 0 else contenders[::-1]
        for size in sizes:
            warm(corpora[size])
            for contender in order:
                runs.append(run_quiet(contender, corpora[size], work, round_, args))
                print(describe(runs[-1]), flush=True)
    command = "python -m benchmarks.normalize_dedup " + " ".join(sys.argv[1:])
    curate_exe = args.curate if any(isinstance(c, Curate) for c in contenders) else None
    reference, agree = check(runs, corpora)
    lines = write_results(runs, corpora, reference, sizes, args.rounds, command, curate_exe)
    print("\n".join(lines))
    if not agree:
        raise SystemExit("contenders kept different documents")


if __name__ == "__main__":
    main()

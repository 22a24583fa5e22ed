"""What collecting statistics costs (issue 19): a cold run with them against one without.

    python -m benchmarks.stats_overhead                        # 200 MB, 5 rounds, the default
    python -m benchmarks.stats_overhead --size 10 --rounds 1 --no-write   # smoke test

Corpus: benchmarks/corpus.py's (--size MB of man pages, docs and Python sources in files of
about 50 MB, with exact copies). Recipe: the full pre-training recipe (normalize,
language_filter, quality_filter, exact_dedup, minhash_dedup, pii, tokenize with Mistral
7B's SentencePiece model from the mistral-common wheel, `threads: 1`, packed into
4096-token rows), every stage with its defaults but language_filter's `min_score` (0.4: the
corpus is man pages and code) and quality_filter's rules, which are
recipes/pretrain-sample.yaml's (the published defaults would leave the stages after it
almost nothing of man pages and code), 2 workers, Arrow pools and RAYON_NUM_THREADS pinned to 1,
the stage cache off in both runs (so neither pays for keeping entries).

Each round runs the recipe with `output.stats` and `output.examples` true (the defaults:
statistics, and removed documents kept as examples through PII) and with both `false`, each
in a fresh root, in alternating order, under benchmarks/reaper.py (CPU seconds of the
whole process tree), at nice -10 after waiting up to --patience seconds for at most
--max-load cores of other load. The two versions' shards must be the same bytes, the run
with statistics must hold statistics.json (the same bytes every round) and the other none;
any difference is printed and the script exits 1. The verdict is the median over rounds of
CPU with / CPU without (issue 19's budget: at most 1.05). Results, rewritten after every
round: benchmarks/results/stats_overhead-<size>.{md,json}.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import corpus as corpora
from benchmarks.partition_parallelism import prepare, run_once, warm
from benchmarks.results_file import save_results
from benchmarks.stage_cache import git
from benchmarks.tokenize_convert import mistral_file

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORK = HERE / "work" / "stats_overhead"
NAME = "pretrain"
BUDGET = 1.05
QUALITY = {  # recipes/pretrain-sample.yaml's: the published defaults keep ~1% of man pages
    "gopher_quality": {"min_doc_words": 10, "min_alpha_words_ratio": 0.6, "min_stop_words": 1},
    "gopher_repetition": {"top_ngram_char_frac": {}},
    "c4": False,
    "fineweb": {"min_line_punct_ratio": 0.1, "max_dup_line_char_ratio": 0.1},
}
STATISTICS = "statistics.json"


@dataclass
class Run:
    round: int
    stats: bool
    wall_s: float
    cpu_s: float
    foreign_load: float
    statistics_sha256: str | None
    statistics_bytes: int


def recipe(files: list[Path], root: Path, stats: bool) -> dict[str, Any]:
    """The full pre-training recipe over files, its version in root."""
    tokenize = {
        "source": str(mistral_file("tokenizer.model.v1")),
        "bos": True,
        "eos": True,
        "threads": 1,
        "pack": {"seq_len": 4096},
    }
    return {
        "name": NAME,
        "inputs": [str(f) for f in files],
        "id_field": "id",
        "stages": [
            {"normalize": {}},
            {"language_filter": {"min_score": 0.4}},
            {"quality_filter": QUALITY},
            {"exact_dedup": {}},
            {"minhash_dedup": {}},
            {"pii": {}},
            {"tokenize": tokenize},
        ],
        "output": {"root": str(root), "cache": False, "stats": stats, "examples": stats},
        "engine": {"kind": "local", "workers": 2},
    }


def one(files: list[Path], stats: bool, rnd: int, args: argparse.Namespace) -> tuple[Run, Path]:
    folder = WORK / ("with" if stats else "without")
    r = recipe(files, folder / "out", stats)
    for f in files:
        warm(f)
    measured, _ = run_once(r, folder, args.tree, args.max_load, args.patience)
    version = folder / "out" / NAME / "v1"
    path = version / STATISTICS
    data = path.read_bytes() if path.exists() else None
    run = Run(
        round=rnd,
        stats=stats,
        wall_s=round(measured["wall_s"], 3),
        cpu_s=round(measured["cpu_s"], 3),
        foreign_load=round(measured["foreign_load"], 3),
        statistics_sha256=hashlib.sha256(data).hexdigest() if data is not None else None,
        statistics_bytes=len(data) if data is not None else 0,
    )
    print(
        f"  r{rnd} stats {'on ' if stats else 'off'}  wall {run.wall_s:8.2f} s  "
        f"CPU {run.cpu_s:8.2f} s  foreign load {run.foreign_load:4.2f}",
        flush=True,
    )
    return run, version


def shards(version: Path) -> list[tuple[str, str]]:
    manifest = json.loads((version / "manifest.json").read_text())
    return [(s["path"], s["sha256"]) for s in manifest["shards"]]


def differences(on: Run, off: Run, v_on: Path, v_off: Path, first: str | None) -> list[str]:
    found = []
    if shards(v_on) != shards(v_off):
        found.append("the shards differ between the runs with and without statistics")
    if on.statistics_sha256 is None:
        found.append("the run with statistics wrote no statistics.json")
    if off.statistics_sha256 is not None:
        found.append("the run without statistics wrote a statistics.json")
    if first is not None and on.statistics_sha256 != first:
        found.append("statistics.json differs from the first round's")
    return found


def verdict(runs: list[Run]) -> list[str]:
    rounds = sorted({r.round for r in runs})

    def get(rnd: int, stats: bool) -> Run:
        return next(r for r in runs if r.round == rnd and r.stats == stats)

    cpu = statistics.median(get(i, True).cpu_s / get(i, False).cpu_s for i in rounds)
    wall = statistics.median(get(i, True).wall_s / get(i, False).wall_s for i in rounds)
    on_cpu = statistics.median(get(i, True).cpu_s for i in rounds)
    off_cpu = statistics.median(get(i, False).cpu_s for i in rounds)
    ok = "ok" if cpu <= BUDGET else "MISSED"
    size = get(rounds[0], True).statistics_bytes
    return [
        f"CPU with statistics {on_cpu:.2f} s, without {off_cpu:.2f} s (medians)",
        f"CPU with / without: {cpu:.4f} (median of {len(rounds)} paired rounds; budget <= "
        f"{BUDGET}: {ok}); wall with / without {wall:.4f}",
        f"statistics.json: {size / 1e3:.1f} kB",
        f"foreign load, worst run: {max(r.foreign_load for r in runs):.2f} cores",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=200, help="corpus MB")
    parser.add_argument("--rounds", type=int, default=5, help="paired rounds")
    parser.add_argument("--tree", type=Path, default=REPO, help="the curate checkout to run")
    parser.add_argument("--max-load", type=float, default=0.1, help="cores, before each run")
    parser.add_argument("--patience", type=float, default=10.0, help="seconds to wait for it")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()

    info = corpora.build(args.size)
    files = [info.folder / name for name in info.files]
    prepare(args.tree)
    commit = git(args.tree, "rev-parse", "--short", "HEAD")
    print(f"{info.folder}: {info.describe()}", flush=True)
    print(f"tree {args.tree} at {commit}", flush=True)
    runs: list[Run] = []
    problems: list[str] = []
    lines: list[str] = []
    first: str | None = None
    for rnd in range(args.rounds):
        order = (True, False) if rnd % 2 == 0 else (False, True)
        done = {stats: one(files, stats, rnd, args) for stats in order}
        (on, v_on), (off, v_off) = done[True], done[False]
        found = differences(on, off, v_on, v_off, first)
        first = first or on.statistics_sha256
        for line in found:
            print(f"  DIFFERENT (round {rnd}): {line}", flush=True)
        problems += found
        runs += [done[s][0] for s in order]
        lines = verdict(runs)
        same = "shards identical with and without statistics; statistics.json the same every round"
        lines.append(f"BYTE COMPARISON FAILED: {len(problems)} difference(s)" if problems else same)
        if rnd + 1 < args.rounds:
            lines.append(f"(after {rnd + 1} of {args.rounds} rounds: the run goes on)")
        if not args.no_write:  # after every round: a run cut short still leaves its figures
            write_results(args, info, commit, runs, lines)
    print("\n".join(lines), flush=True)
    sys.exit(1 if problems else 0)


def write_results(
    args: argparse.Namespace,
    info: corpora.CorpusInfo,
    commit: str,
    runs: list[Run],
    lines: list[str],
) -> None:
    dirty = (
        " (with uncommitted changes)" if git(args.tree, "status", "--porcelain", "curate") else ""
    )
    command = "python -m benchmarks.stats_overhead " + " ".join(sys.argv[1:])
    rows = ["| round | statistics | wall s | CPU s | foreign |", "|---|---|---|---|---|"]
    for r in runs:
        rows.append(
            f"| {r.round} | {'on' if r.stats else 'off'} | {r.wall_s:.2f} | {r.cpu_s:.2f} | "
            f"{r.foreign_load:.2f} |"
        )
    save_results(
        f"stats_overhead-{args.size}",
        "Statistics: what collecting them costs (issue 19)",
        f"Corpus: {info.describe()}. Recipe: normalize, language_filter (min_score 0.4), "
        "quality_filter (pretrain-sample.yaml's rules), exact_dedup, minhash_dedup, pii, "
        "tokenize (Mistral 7B SentencePiece v1, `threads: 1`, packed 4096), 2 workers, "
        "stage cache off; Arrow pools and RAYON_NUM_THREADS pinned to 1."
        f" curate {commit}{dirty} ({args.tree}); ",
        rows,
        lines,
        command,
        runs,
    )


if __name__ == "__main__":
    main()

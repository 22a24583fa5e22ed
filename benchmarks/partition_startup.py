"""What one more partition costs (issue 16, point 3: "more per-partition start-up").

    python -m benchmarks.partition_startup                     # 30 MB, 64/16/4/1 MB, 3 rounds
    python -m benchmarks.partition_startup --size 30 --rounds 2 --sizes 64MB,8MB,2MB

The same one-file corpus (benchmarks/corpus.py, --size MB) goes through two recipes, each
at several partition sizes, on one worker (the driver runs every partition itself, so no
pool's scheduling or second core blurs the figure): the cheap stages alone (normalize,
exact_dedup, minhash_dedup), where a partition's fixed costs weigh most, and the full
pre-training recipe of benchmarks/partition_parallelism.py (plus pii and tokenize). Threads
are pinned as there. Rounds alternate the order of the sizes.

Per recipe, the slope of a least-squares line through (partitions, CPU seconds) and
(partitions, wall seconds) of every run is the cost of one partition more: opening the input
at an offset, a first batch, the staged files, summary and decision files of each barrier
pass, shards, completion records and their fsyncs. The report then shows, for each
candidate partition size, that cost as a share of the work: slope / (partition MB x CPU
seconds per MB at the largest size). Results: benchmarks/results/partition_startup.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks import corpus as corpora
from benchmarks.partition_parallelism import REPO, WORK, prepare, pretrain_recipe, run_once
from benchmarks.results_file import RESULTS

MB = 10**6
CANDIDATES_MB = (64, 32, 16, 8, 4, 2, 1)


@dataclass
class Point:
    recipe: str  # light or full
    partition_mb: float
    round: int
    partitions: int
    cpu_s: float
    wall_s: float
    foreign_load: float


def parse_mb(text: str) -> float:
    """MB (10**6 bytes) in a size as recipes write it: 64MB, 500KB, 1GiB, 4096."""
    text = text.strip().upper().removesuffix("B")
    base = 1024 if text.endswith("I") else 1000
    text = text.removesuffix("I")
    power = {"K": 1, "M": 2, "G": 3}.get(text[-1:], 0)
    return float(text[:-1] if power else text) * base**power / MB


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys against xs."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=30, help="corpus MB, in one file")
    parser.add_argument("--sizes", default="64MB,16MB,4MB,1MB", help="partition sizes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--recipes", default="light,full")
    parser.add_argument("--tree", type=Path, default=REPO, help="the curate checkout to run")
    parser.add_argument("--max-load", type=float, default=0.5, help="cores; waits for less")
    parser.add_argument("--patience", type=float, default=30.0)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()

    info = corpora.build(args.size, one_file=True)
    corpus_file = info.folder / info.files[0]
    prepare(args.tree)
    sizes = [s.strip() for s in args.sizes.split(",")]
    print(f"{corpus_file}: {info.describe()}", flush=True)
    points: list[Point] = []
    for name in args.recipes.split(","):
        for r in range(args.rounds):
            for size in sizes if r % 2 == 0 else sizes[::-1]:
                folder = WORK / "startup"
                recipe = pretrain_recipe(corpus_file, folder / "out", 1, size, name == "full")
                m, manifest = run_once(recipe, folder, args.tree, args.max_load, args.patience)
                parts = sum(i.get("partitions", 0) for i in manifest["inputs"])
                point = Point(name, parse_mb(size), r, parts, round(m["cpu_s"], 3),
                              round(m["wall_s"], 3), round(m["foreign_load"], 2))  # fmt: skip
                points.append(point)
                print(
                    f"  {name} r{r} {size:>6}: {parts:4d} partitions  CPU {point.cpu_s:7.2f} s  "
                    f"wall {point.wall_s:7.2f} s  foreign load {point.foreign_load:.2f}",
                    flush=True,
                )
    lines = summarize(points, info.bytes / MB)
    print("\n".join(lines))
    if not args.no_write:
        name = f"partition_startup-{args.size}"
        command = "python -m benchmarks.partition_startup " + " ".join(sys.argv[1:])
        header = [
            "# Per-partition start-up (issue 16, point 3)",
            "",
            f"Corpus: {info.describe()}, one file; 1 worker; threads pinned to 1. "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
            "",
        ]
        text = "\n".join([*header, *lines, "", f"Command: `{command}`", ""])
        (RESULTS / f"{name}.md").write_text(text)
        raw = json.dumps([asdict(p) for p in points], indent=1)
        (RESULTS / f"{name}.json").write_text(raw + "\n")


def summarize(points: list[Point], corpus_mb: float) -> list[str]:
    lines = ["| recipe | partition MB | partitions | CPU s (median) | wall s (median) |"]
    lines.append("|---|---|---|---|---|")
    per_partition = {}
    for name in dict.fromkeys(p.recipe for p in points):
        mine = [p for p in points if p.recipe == name]
        for mb in sorted({p.partition_mb for p in mine}, reverse=True):
            at = [p for p in mine if p.partition_mb == mb]
            lines.append(
                f"| {name} | {mb:g} | {at[0].partitions} | "
                f"{statistics.median(p.cpu_s for p in at):.2f} | "
                f"{statistics.median(p.wall_s for p in at):.2f} |"
            )
        xs = [float(p.partitions) for p in mine]
        cpu, wall = slope(xs, [p.cpu_s for p in mine]), slope(xs, [p.wall_s for p in mine])
        largest = max(p.partition_mb for p in mine)
        base = statistics.median(p.cpu_s for p in mine if p.partition_mb == largest)
        per_partition[name] = (cpu, wall, base / corpus_mb)
    lines.append("")
    for name, (cpu, wall, cpu_per_mb) in per_partition.items():
        shares = ", ".join(f"{mb} MB {cpu / (mb * cpu_per_mb):.1%}" for mb in CANDIDATES_MB)
        lines.append(
            f"- {name}: one partition more costs {cpu * 1000:.0f} ms CPU, "
            f"{wall * 1000:.0f} ms wall; the work is {cpu_per_mb:.3f} CPU-s per MB, so the "
            f"start-up share at a partition size of {shares}"
        )
    lines.append(
        "- foreign load, worst run: "
        f"{max(p.foreign_load for p in points):.2f} cores (CPU seconds move less with it "
        "than wall seconds)"
    )
    return lines


if __name__ == "__main__":
    main()

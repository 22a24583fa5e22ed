"""Planning one large plain JSONL file: time and bytes read by `plan_partitions`, warm and cold.

Cold means the file's pages dropped from the page cache first (posix_fadvise DONTNEED,
no root needed), as they are at scale when a run starts after another has read hundreds
of GB. Bytes read are the process's `rchar` (/proc/self/io) around the call. With the
plan cache (`curate.io.plan_cache`, absent before issue 16) the file is planned once,
then again from the cache's text as a build reads it.

    python -m benchmarks.planning [--tree DIR] [--file big.jsonl] [--gb 2] [--mb 8 32 128]

Without --file it writes benchmarks/work/planning/big.jsonl (about 2 minutes). --tree
imports curate from another tree (`git archive 72bf97a | tar -x -C DIR`) to compare;
results/planning.md holds one comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path


def write_corpus(path: Path, gb: float) -> None:
    rng = random.Random(0)
    words = [f"w{i}" for i in range(5000)]
    path.parent.mkdir(parents=True, exist_ok=True)
    size, i = 0, 0
    with open(path, "w") as f:
        while size < gb * (1 << 30):
            text = " ".join(rng.choices(words, k=rng.randint(50, 600)))
            line = json.dumps({"text": text, "n": i}) + "\n"
            f.write(line)
            size += len(line)
            i += 1


def drop_pages(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def rchar() -> int:
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path)
    parser.add_argument("--gb", type=float, default=2.0)
    parser.add_argument("--mb", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tree", type=Path, help="import curate from this tree")
    args = parser.parse_args()
    if args.tree is not None:
        sys.path.insert(0, str(args.tree.resolve()))

    import curate
    from curate.io.inputs import discover_inputs
    from curate.io.partitions import plan_partitions

    try:
        from curate.io.plan_cache import PlanCache
    except ImportError:
        PlanCache = None  # a tree from before the cache

    path = args.file or Path(__file__).parent / "work" / "planning" / "big.jsonl"
    if not path.exists():
        write_corpus(path, args.gb)
    [found] = discover_inputs([path.name], path.parent)
    print(f"curate {Path(curate.__file__).parent}; {path} ({found.size / 1e9:.2f} GB)")
    for mb in args.mb:
        target = mb << 20
        cache_text = None
        if PlanCache is not None:
            cache = PlanCache(None)
            plan_partitions([found], target, cache)
            cache_text = cache.text()
        for kind in ["cold", "warm"] * args.rounds:
            if kind == "cold":
                drop_pages(path)
            cached = ""
            if cache_text is not None and PlanCache is not None:  # reads no page of the file
                t0 = time.perf_counter()
                plan_partitions([found], target, PlanCache(cache_text))
                cached = f"; from the cache {(time.perf_counter() - t0) * 1000:.2f} ms"
            before, t0 = rchar(), time.perf_counter()
            n = len(plan_partitions([found], target))
            ms, read = (time.perf_counter() - t0) * 1000, rchar() - before
            print(f"{mb:>4} MB partitions: {n:>4}, {kind}: {ms:9.1f} ms, read {read:>14,} bytes"
                  f"{cached}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()

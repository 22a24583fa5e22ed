"""Profile one curate run of the normalize + dedup benchmark and say where time goes.

When curate misses a target, the question is which part of it is slow: reading,
normalizing, hashing, the barrier, writing, checksums, fsync or start-up. py-spy
samples the CLI process and every worker (``--subprocesses``, native frames off);
this script then sums the samples by process, by the function that was running
(self time) and by every function on the stack (inclusive time).

Usage: python -m benchmarks.profile_curate --size 400 [--top 25] [--rate 250]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
from collections import Counter
from pathlib import Path

from benchmarks import corpus
from benchmarks.contenders import (
    Curate,
    contender_env,
    curate_folder,
    default_curate_executable,
    precompile,
)


def parse(raw: Path) -> tuple[Counter, Counter, Counter, int]:
    """Samples by process, by leaf frame and by any frame on the stack, and in total."""
    by_process: Counter[str] = Counter()
    leaf: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        samples = int(count)
        frames = stack.split(";")
        total += samples
        by_process[frames[0]] += samples
        leaf[frames[-1]] += samples
        for frame in set(frames[1:]):
            inclusive[frame] += samples
    return by_process, leaf, inclusive, total


def show(title: str, counts: Counter, total: int, top: int) -> None:
    print(f"\n{title}")
    for frame, samples in counts.most_common(top):
        print(f"{samples / total:6.1%}  {frame[:150]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=400)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--rate", type=int, default=250, help="samples per second")
    parser.add_argument("--curate", default=default_curate_executable())
    args = parser.parse_args()
    info = corpus.build(args.size)
    contender = Curate("curate-profile", "", executable=args.curate)
    contender.prepare(corpus.WORK)
    raw = contender.folder(corpus.WORK) / "py-spy.txt"
    py_spy = shutil.which("py-spy") or str(Path(args.curate).parent / "py-spy")
    record = [py_spy, "record", "--subprocesses", "--format", "raw", "-r", str(args.rate)]
    command = [*record, "-o", str(raw), "--", *contender.command(info, corpus.WORK)]
    precompile([curate_folder(args.curate) / "curate"])
    subprocess.run(command, check=True, env=contender_env())
    by_process, leaf, inclusive, total = parse(raw)
    print(f"{total} samples at {args.rate}/s over all processes; raw stacks in {raw}")
    show("by process", by_process, total, args.top)
    show("self time (the running function)", leaf, total, args.top)
    show("inclusive time (anywhere on the stack)", inclusive, total, args.top)


if __name__ == "__main__":
    main()

"""Touch every input without changing it: no rebuild, and what the run costs (issue 17).

Copies a JSONL corpus (default: benchmarks/work/corpus-300, see `benchmarks.corpus`) into
a work folder, builds it once (normalize + exact_dedup: the stages do not matter here,
nothing is rebuilt), then for `--rounds` rounds, paired:

- an up-to-date `curate run` (the stat fingerprint names the version: stats only);
- every input touched (`os.utime`, new mtime), then `curate run`: the stat fingerprint is
  new, the run hashes every input's partitions (page cache warm: the machine is shared,
  caches are not dropped), finds the version by its content fingerprint, files the alias;
- `curate run` again: as cheap as the first (the alias);
- every input touched and its pages dropped from the page cache (`posix_fadvise
  DONTNEED` on the input files only), then `curate run`: hashing reads the disk;
- in one process, imports excluded: the up-to-date call and a touched call, split into
  the stat fingerprint (listing and stat'ing inputs, stage software, the payload's hash)
  and finding the version (touched: hashing, the content index, the alias).

Each `curate run` is timed as a whole process (wall, CPU of the process tree) and, from
its `-v` log, the hashing alone (`content fingerprint: N of M inputs hashed (...) in S
s`). Every call must return the first version (no new version folder).

Usage: python -m benchmarks.touch_inputs [--corpus DIR] [--rounds 5] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

WORK = Path(__file__).resolve().parent / "work"
HASHED = re.compile(r"content fingerprint: (\d+) of (\d+) inputs hashed \(([^)]*)\) in ([\d.]+) s")


def curate_run(recipe: Path, env: dict[str, str]) -> dict[str, object]:
    """One `curate -v run` process: wall, CPU of the tree, its output and the hashing line."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "curate.cli", "-v", "run", "--quiet", str(recipe)],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    found = HASHED.search(done.stderr)
    return {
        "wall": round(wall, 4),
        "cpu": round(cpu, 4),
        "out": done.stdout.strip(),
        "hashed_files": int(found.group(1)) if found else 0,
        "hashed": found.group(3) if found else "",
        "hash_seconds": float(found.group(4)) if found else 0.0,
    }


PROBE = """
import sys, time
t0 = time.perf_counter()
from curate.recipe import Recipe
from curate.recipe_run import RecipeRun
recipe = Recipe.load(sys.argv[1])
t1 = time.perf_counter()
with recipe.located():
    run = RecipeRun(recipe, lambda *a: None, None, "sizes")  # stat every input, fingerprint
    t2 = time.perf_counter()
    version = run.version()  # up to date: the index; touched: hash, content index, alias
t3 = time.perf_counter()
assert version.up_to_date and version.name == "v1"
print(t2 - t1, t3 - t2, t3 - t1)
"""


def in_process(recipe: Path, env: dict[str, str]) -> dict[str, float]:
    """Inside one process, imports excluded: the stat fingerprint (listing and stat'ing the
    inputs, the stages' software, hashing the payload), then finding the version (and, when
    touched, hashing the inputs and filing the alias)."""
    done = subprocess.run([sys.executable, "-c", PROBE, str(recipe)], env=env,
                          capture_output=True, text=True, check=True)  # fmt: skip
    stat, find, total = (float(x) for x in done.stdout.split())
    return {"stat_fingerprint": round(stat, 4), "find_or_hash": round(find, 4),
            "total": round(total, 4)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=WORK / "corpus-300")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--work", type=Path, default=WORK / "touch")
    args = parser.parse_args()

    files = sorted(args.corpus.glob("*.jsonl"))
    if not files:
        sys.exit(f"no *.jsonl in {args.corpus}: python -m benchmarks.corpus --size 300")
    shutil.rmtree(args.work, ignore_errors=True)
    (args.work / "data").mkdir(parents=True)
    for f in files:
        shutil.copyfile(f, args.work / "data" / f.name)
    recipe = args.work / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({
        "name": "touch", "inputs": ["data/*.jsonl"], "id_field": "id",
        "stages": [{"normalize": {}}, {"exact_dedup": {}}],
        "output": {"root": "out", "fsync": False}, "engine": {"workers": args.workers},
    }))  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    size = sum(f.stat().st_size for f in (args.work / "data").iterdir())
    first = curate_run(recipe, env)
    print(f"built: {first['out']} ({size / 1e6:.0f} MB in {len(files)} files), "
          f"{first['wall']:.1f} s wall")  # fmt: skip
    built = first["out"]
    rounds = []
    data = sorted((args.work / "data").iterdir())
    stamp = time.time()

    def touch(evict: bool = False) -> None:
        nonlocal stamp
        stamp += 10
        for f in data:
            os.utime(f, (stamp, stamp))
            if evict:  # this file's pages only: the shared machine's cache stays
                fd = os.open(f, os.O_RDONLY)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                os.close(fd)

    for i in range(args.rounds):
        load = os.getloadavg()[0]
        plain = curate_run(recipe, env)
        touch()
        touched = curate_run(recipe, env)
        after = curate_run(recipe, env)
        touch(evict=True)
        cold = curate_run(recipe, env)
        split = {"up_to_date": in_process(recipe, env)}
        touch()
        split["touched"] = in_process(recipe, env)
        versions = sorted(p.name for p in (args.work / "out" / "touch").glob("v*"))
        assert versions == ["v1"], versions  # nothing rebuilt
        assert touched["hashed_files"] == cold["hashed_files"] == len(files)
        assert after["hashed_files"] == 0
        for call in (plain, touched, after, cold):
            assert "is up to date: v1" in str(call["out"]), call
        rounds.append({"load": load, "up_to_date": plain, "touched": touched, "next": after,
                       "touched_cold": cold, "in_process": split})  # fmt: skip
        print(f"round {i + 1}: up to date {plain['wall']:.3f} s, touched {touched['wall']:.3f} s "
              f"(hashing {touched['hash_seconds']:.3f} s, {touched['hashed']}), next "
              f"{after['wall']:.3f} s, touched cold {cold['wall']:.3f} s (hashing "
              f"{cold['hash_seconds']:.3f} s); in process: {split}; load {load:.2f}")  # fmt: skip

    def median(call: str, key: str) -> float:
        return statistics.median(float(r[call][key]) for r in rounds)  # type: ignore[index]

    summary = {
        "corpus_mb": round(size / 1e6),
        "files": len(files),
        "rounds": len(rounds),
        "median": {
            call: {k: median(call, k) for k in ("wall", "cpu", "hash_seconds")}
            for call in ("up_to_date", "touched", "next", "touched_cold")
        },
        "in_process": {
            call: {
                k: statistics.median(r["in_process"][call][k] for r in rounds)  # type: ignore[index]
                for k in ("stat_fingerprint", "find_or_hash", "total")
            }
            for call in ("up_to_date", "touched")
        },
        "load_median": statistics.median(r["load"] for r in rounds),
        "first": built,
    }
    m = summary["median"]
    stat_part = m["touched"]["wall"] - m["touched"]["hash_seconds"]
    print(json.dumps(summary, indent=1))
    touched, plain = m["touched"], m["up_to_date"]
    print(f"touched: {touched['wall']:.3f} s wall = {touched['hash_seconds']:.3f} s hashing "
          f"+ {stat_part:.3f} s rest (up to date: {plain['wall']:.3f} s)")  # fmt: skip


if __name__ == "__main__":
    main()

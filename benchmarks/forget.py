"""`curate forget` of 100 documents spread over a packed, tokenized version, against a full
rebuild with the same exclusions (issue 20): wall and CPU seconds of each, the bytes forget
wrote (files of the new version that are not hard links to the previous one's) against the
version's, and whether both give the same shards. Then `curate gc --purge-forgotten`, which
rewrites the earlier version without them (`curate.forget.rewrite`): its wall and CPU
seconds, the bytes it wrote (files of the rewritten version that are not the files it had),
and whether the rewritten version verifies and equals the one forget published.

Builds the version (normalize, exact_dedup, tokenize with pack, sample_data's tokenizer; the
stage cache on) from the seeded identity corpus (22 MB, benchmarks/identity_corpus.py) or
every *.jsonl of --corpus; forgets every (n/100)-th document by id; then builds from scratch
in another folder (cache off) with the exclusions file copied.

Run ``python -m benchmarks.forget [--corpus DIR] [--partition-size 1MB] [--documents 100]
[--shard-size 256MB]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from benchmarks import identity_corpus, trees

WORK = Path(__file__).resolve().parent / "work" / "forget"


def recipe(
    folder: Path, corpus: Path, partition_size: str, cache: bool, shard_size: str = "256MB"
) -> Path:
    tokenizer = trees.REPO / "sample_data" / "tokenizer"
    data = {
        "name": "forget",
        "inputs": [str(corpus / "*.jsonl")],
        "id_field": "id",
        "partition_size": partition_size,
        "stages": [
            {"normalize": {}},
            {"exact_dedup": {}},
            {"tokenize": {"source": str(tokenizer), "pack": {"seq_len": 2048}}},
        ],
        "output": {
            "root": str(folder / "out"),
            "fsync": False,
            "cache": cache,
            "shard_size": shard_size,
        },
        "engine": {"workers": 2},
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def timed(*args: str) -> tuple[float, float]:
    """Wall and CPU seconds (the process and its workers) of one curate command."""
    env = {**os.environ, "PYTHONPATH": str(trees.REPO)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "curate.cli", *args], env=env, check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return round(wall, 2), round(after.ru_utime - before.ru_utime + after.ru_stime
                                 - before.ru_stime, 2)  # fmt: skip


def latest(folder: Path) -> Path:
    dataset = folder / "out" / "forget"
    return dataset / (dataset / "LATEST").read_text().strip()


def listed(version: Path) -> list[dict[str, object]]:
    m = json.loads((version / "manifest.json").read_text())
    return [*m["shards"], *m["rejected"], *m["quarantine"], *(m.get("lineage") or []),
            *(m.get("examples") or [])]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, help="a folder of *.jsonl (default: identity)")
    parser.add_argument("--partition-size", default="1MB")
    parser.add_argument("--documents", type=int, default=100)
    parser.add_argument("--shard-size", default="256MB")
    args = parser.parse_args()
    corpus = args.corpus
    if corpus is None:
        corpus = WORK / "corpus"
        if not (corpus / ".done").exists():
            identity_corpus.write(corpus)
            (corpus / ".done").write_text("")
    shutil.rmtree(WORK / "run", ignore_errors=True)
    shutil.rmtree(WORK / "rebuild", ignore_errors=True)
    path = recipe(WORK / "run", corpus, args.partition_size, True, args.shard_size)
    cold = timed("run", str(path), "--quiet")
    before = latest(WORK / "run")
    from curate.lineage.lookup import Lineage
    from curate.store import Store
    from curate.version import Version

    lineage = Lineage(Version(before))
    n = lineage.documents
    step = max(n // args.documents, 1)
    ids = [lineage.row(p)["id"] for p in range(step // 2, n, step)][: args.documents]
    ids_file = WORK / "ids.txt"
    ids_file.write_text("\n".join(ids) + "\n")
    forget = timed("forget", str(path), "--ids", str(ids_file), "--reason", "benchmark", "-q")
    after = latest(WORK / "run")
    files = listed(after)
    fresh = [
        f
        for f in files
        if not (before / str(f["path"])).exists()
        or os.stat(before / str(f["path"])).st_ino != os.stat(after / str(f["path"])).st_ino
    ]
    rebuild_recipe = recipe(WORK / "rebuild", corpus, args.partition_size, False, args.shard_size)
    exclusions = WORK / "run" / "out" / "forget" / ".forget" / "exclusions.json"
    Store(WORK / "rebuild" / "out", "forget").save_own(".forget", "exclusions.json",
                                                       exclusions.read_text())  # fmt: skip
    rebuild = timed("run", str(rebuild_recipe), "--quiet")
    inodes = {os.stat(p).st_ino for p in before.rglob("*") if p.is_file()}
    purge = timed("gc", str(before.parent), "--purge-forgotten")
    from curate.verify import verify

    rewritten = listed(before)
    purge_fresh = [f for f in rewritten if os.stat(before / str(f["path"])).st_ino not in inodes]
    shards = [(s["path"], s["sha256"]) for s in json.loads((after / "manifest.json").read_text())
              ["shards"]]  # fmt: skip
    purged_shards = [(s["path"], s["sha256"]) for s in json.loads(
        (before / "manifest.json").read_text())["shards"]]  # fmt: skip
    rebuilt = [(s["path"], s["sha256"]) for s in json.loads(
        (latest(WORK / "rebuild") / "manifest.json").read_text())["shards"]]  # fmt: skip
    result = {
        "documents": n,
        "forgotten": len(ids),
        "partitions": len(json.loads((after / "manifest.json").read_text())["partitions"]),
        "cold_run_wall_cpu": cold,
        "forget_wall_cpu": forget,
        "rebuild_wall_cpu": rebuild,
        "version_bytes": sum(int(f["bytes"]) for f in files),  # type: ignore[call-overload]
        "forget_bytes_written": sum(int(f["bytes"]) for f in fresh),  # type: ignore[call-overload]
        "files_written": f"{len(fresh)} of {len(files)}",
        "same_shards_as_rebuild": shards == rebuilt,
        "purge_wall_cpu": purge,
        "purge_bytes_written": sum(int(f["bytes"]) for f in purge_fresh),  # type: ignore[call-overload]
        "purge_files_written": f"{len(purge_fresh)} of {len(rewritten)}",
        "purged_version_verifies": verify(before) == [],
        "purged_version_equals_forgets": purged_shards == shards,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()

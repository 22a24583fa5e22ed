"""Lineage's cost (issue 20 point 1): bytes per document, share of a packed tokenized version,
`curate trace --id` latency, and (with --base) the CPU-seconds of a cold run against a commit
without lineage.

Builds a packed, tokenized version (normalize, exact_dedup, tokenize with pack, sample_data's
tokenizer) of a JSONL corpus: by default the seeded identity corpus (22 MB,
benchmarks/identity_corpus.py), or every *.jsonl of --corpus. Reports what the manifest lists:
the lineage files' bytes over documents written, their share of every file the version lists,
and the time of `curate trace VERSION --id ID` (a fresh process, and in-process) for ids spread
over the version.

Run ``python -m benchmarks.lineage [--corpus DIR] [--partition-size 1MB] [--base REV]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import yaml

from benchmarks import identity_corpus, trees

WORK = Path(__file__).resolve().parent / "work" / "lineage"


def recipe(folder: Path, corpus: Path, partition_size: str, seq_len: int) -> Path:
    tokenizer = trees.REPO / "sample_data" / "tokenizer"
    data = {
        "name": "lineage",
        "inputs": [str(corpus / "*.jsonl")],
        "id_field": "id",
        "partition_size": partition_size,
        "stages": [
            {"normalize": {}},
            {"exact_dedup": {}},
            {"tokenize": {"source": str(tokenizer), "pack": {"seq_len": seq_len}}},
        ],
        "output": {"root": str(folder / "out"), "fsync": False, "cache": False},
        "engine": {"workers": 2},
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def build(tree: Path, path: Path) -> tuple[Path, float, float]:
    """The version, the run's wall seconds and its CPU seconds (the process and its workers)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "curate.cli", "run", str(path), "--quiet"], env=env,
                   cwd=path.parent, check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    dataset = path.parent / "out" / "lineage"
    return dataset / (dataset / "LATEST").read_text().strip(), wall, cpu


def sizes(version: Path) -> dict[str, object]:
    manifest = json.loads((version / "manifest.json").read_text())
    listed = [*manifest["shards"], *manifest["rejected"], *manifest["quarantine"]]
    lineage = manifest.get("lineage") or []
    extra = [manifest[k] for k in ("statistics", "card") if manifest.get(k)]
    total = sum(r["bytes"] for r in [*listed, *lineage, *extra])
    lineage_bytes = sum(r["bytes"] for r in lineage)
    written = manifest["counts"]["written"]
    return {
        "documents": written,
        "partitions": len(manifest["partitions"]),
        "tokens": manifest["tokens"],
        "shard_bytes": sum(r["bytes"] for r in manifest["shards"]),
        "version_bytes": total,
        "lineage_bytes": {r["path"]: r["bytes"] for r in lineage},
        "lineage_bytes_per_document": round(lineage_bytes / max(written, 1), 2),
        "lineage_share_percent": round(100 * lineage_bytes / max(total, 1), 3),
    }


def trace_latency(tree: Path, version: Path, samples: int = 5) -> dict[str, float]:
    from curate.lineage.lookup import Lineage
    from curate.lineage.trace import Tracer
    from curate.version import Version

    v = Version(version)
    lineage = Lineage(v)
    n = lineage.documents
    ids = [lineage.row(p)["id"] for p in range(0, n, max(n // samples, 1))][:samples]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    walls = []
    for doc_id in ids:
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "curate.cli", "trace", str(version), "--id", doc_id],
                       env=env, check=True, stdout=subprocess.DEVNULL)  # fmt: skip
        walls.append(time.perf_counter() - t)
    inside = []
    tracer = Tracer(v)
    for doc_id in ids:
        t = time.perf_counter()
        tracer.by_id(doc_id)
        inside.append(time.perf_counter() - t)
    return {
        "command_seconds_max": round(max(walls), 3),
        "command_seconds_median": round(sorted(walls)[len(walls) // 2], 3),
        "in_process_seconds_max": round(max(inside), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, help="a folder of *.jsonl (default: identity)")
    parser.add_argument("--partition-size", default="1MB")
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--base", help="a commit without lineage: CPU-seconds compared")
    args = parser.parse_args()
    corpus = args.corpus
    if corpus is None:
        corpus = WORK / "corpus"
        if not (corpus / ".done").exists():
            identity_corpus.write(corpus)
            (corpus / ".done").write_text("")
    trees_to_run = [("head", trees.REPO)]
    if args.base:
        base = trees.export(trees.rev_parse(args.base), trees.CACHE / "trees")
        trees_to_run.insert(0, (f"base {args.base}", base))
    for name, tree in trees_to_run:
        folder = WORK / name.split()[0]
        subprocess.run(["rm", "-rf", str(folder)], check=True)
        version, wall, cpu = build(tree, recipe(folder, corpus, args.partition_size, args.seq_len))
        result: dict[str, object] = {"wall_seconds": round(wall, 2), "cpu_seconds": round(cpu, 2)}
        if (version / "lineage").is_dir():
            result |= sizes(version) | trace_latency(tree, version)
        print(f"{name}: " + json.dumps(result))


if __name__ == "__main__":
    main()

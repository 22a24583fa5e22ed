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

With ``--base REV --head REV --rounds N`` it builds the version N times with each commit,
alternating which goes first, and reports the medians of the paired CPU ratios (issue 20's
budget: lineage costs at most 5% of a cold run). The fair pair is the commit that added
lineage against its parent (``--base 64c3563^ --head d9186db``: nothing else on the build
path changed between them); the current tree against an old commit would mix in every
other change since. Results: benchmarks/results/lineage[-<label>].{md,json}.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from benchmarks import identity_corpus, trees
from benchmarks.results_file import save_results

WORK = Path(__file__).resolve().parent / "work" / "lineage"


@dataclass
class Run:
    """One build's figures, as printed (the results file's JSON rows)."""

    figures: dict[str, Any]


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
    parser.add_argument("--head", help="the commit with lineage (default: this checkout)")
    parser.add_argument("--rounds", type=int, default=1, help="paired rounds (with --base)")
    parser.add_argument("--label", help="results file suffix (default: none, not written)")
    args = parser.parse_args()
    corpus = args.corpus
    if corpus is None:
        corpus = WORK / "corpus"
        if not (corpus / ".done").exists():
            identity_corpus.write(corpus)
            (corpus / ".done").write_text("")
    head = trees.REPO
    if args.head:
        head = trees.export(trees.rev_parse(args.head), trees.CACHE / "trees")
    trees_to_run = [(f"head {args.head or 'checkout'}", head)]
    if args.base:
        base = trees.export(trees.rev_parse(args.base), trees.CACHE / "trees")
        trees_to_run.insert(0, (f"base {args.base}", base))
    runs: list[dict[str, object]] = []
    for rnd in range(args.rounds):
        order = trees_to_run if rnd % 2 == 0 else trees_to_run[::-1]
        for name, tree in order:
            folder = WORK / name.split()[0]
            subprocess.run(["rm", "-rf", str(folder)], check=True)
            path = recipe(folder, corpus, args.partition_size, args.seq_len)
            version, wall, cpu = build(tree, path)
            result: dict[str, object] = {
                "round": rnd,
                "tree": name,
                "wall_seconds": round(wall, 2),
                "cpu_seconds": round(cpu, 2),
                "load": round(os.getloadavg()[0], 2),
            }
            if (version / "lineage").is_dir() and rnd == 0:
                result |= sizes(version) | trace_latency(tree, version)
            print(f"{name}: " + json.dumps(result), flush=True)
            runs.append(result)
    if args.base and args.label:
        write(args, runs, [name for name, _ in trees_to_run])


def write(args: argparse.Namespace, runs: list[dict[str, object]], names: list[str]) -> None:
    """The paired CPU ratios (head / base per round) and the head's lineage figures."""
    base, head = names
    by = {(r["round"], r["tree"]): r for r in runs}
    ratios = [float(by[(k, head)]["cpu_seconds"]) / float(by[(k, base)]["cpu_seconds"])  # type: ignore[arg-type]
              for k in range(args.rounds)]  # fmt: skip
    walls = [float(by[(k, head)]["wall_seconds"]) / float(by[(k, base)]["wall_seconds"])  # type: ignore[arg-type]
             for k in range(args.rounds)]  # fmt: skip
    first = by[(0, head)]
    median = sorted(ratios)[len(ratios) // 2]
    rows = [
        "| round | base CPU s | head CPU s | head / base CPU | head / base wall | load |",
        "|---|---|---|---|---|---|",
        *[
            f"| {k} | {by[(k, base)]['cpu_seconds']} | {by[(k, head)]['cpu_seconds']} | "
            f"{ratios[k]:.3f} | {walls[k]:.3f} | {by[(k, head)]['load']} |"
            for k in range(args.rounds)
        ],
    ]
    lines = [
        f"lineage's cold-run cost: head / base CPU {median:.3f} (median of {args.rounds} "
        f"paired rounds; budget <= 1.05: {'met' if median <= 1.05 else 'missed'}), wall "
        f"{sorted(walls)[len(walls) // 2]:.3f}",
        f"version: {first.get('documents')} documents in {first.get('partitions')} partitions, "
        f"{first.get('tokens')} tokens; lineage {first.get('lineage_bytes_per_document')} "
        f"bytes per document, {first.get('lineage_share_percent')}% of the version's bytes",
        f"curate trace --id: {first.get('command_seconds_median')} s median, "
        f"{first.get('command_seconds_max')} s max as a command (a fresh process); "
        f"{first.get('in_process_seconds_max')} s max in process",
    ]
    command = (
        f"python -m benchmarks.lineage --corpus {args.corpus} --partition-size "
        f"{args.partition_size} --base {args.base} --head {args.head} --rounds {args.rounds} "
        f"--label {args.label}"
    )
    intro = (
        f"Recipe: normalize, exact_dedup, tokenize packed {args.seq_len} (sample_data's "
        f"tokenizer), 2 workers, partition_size {args.partition_size}, cache off; base "
        f"{args.base} (no lineage) against head {args.head}, alternating order; CPU "
        "seconds of the command and its workers. Python "
    )
    save_results(f"lineage-{args.label}", "Lineage's cost (issue 20)", intro, rows, lines,
                 command, [Run(r) for r in runs])  # fmt: skip
    print("\n".join(lines))


if __name__ == "__main__":
    main()

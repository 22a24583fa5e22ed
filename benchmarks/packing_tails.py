"""Tokens lost to packing tails, before and after the tail shard (issue 16 point 3).

Packs the seeded identity corpus (benchmarks/identity_corpus.py, 22 MB of JSONL in 9
files) with `tokenize: {pack: {seq_len}}` (sample_data's tokenizer) at a small
partition size, once with a base commit's curate and once with this checkout's, and
reports the tokens in short rows, which `blocks(seq_len)` skips: counted from the shards
for both, and read from the manifest's `packing` record where it exists.

Run ``python -m benchmarks.packing_tails [--base REV] [--partition-size 1MB]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import yaml

from benchmarks import identity_corpus, trees

WORK = Path(__file__).resolve().parent / "work" / "packing_tails"


def recipe(folder: Path, corpus: Path, partition_size: str | None, seq_len: int) -> Path:
    data: dict[str, object] = {
        "name": "tails",
        "inputs": [str(corpus / "*.jsonl")],
        "id_field": "id",
        "on_error": "quarantine",
        "stages": [
            {
                "tokenize": {
                    "source": str(trees.REPO / "sample_data" / "tokenizer"),
                    "pack": {"seq_len": seq_len},
                }
            }
        ],
        "output": {"root": str(folder / "out"), "fsync": False},
        "engine": {"workers": 2},
    }
    if partition_size is not None:
        data["partition_size"] = partition_size
    path = folder / "recipe.yaml"
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def build(
    tree: Path, folder: Path, corpus: Path, partition_size: str | None, seq_len: int
) -> dict[str, object]:
    path = recipe(folder, corpus, partition_size, seq_len)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    # run from the work folder: `-m` puts the current folder first on sys.path, before the tree
    subprocess.run([sys.executable, "-m", "curate.cli", "run", str(path), "--quiet"], env=env,
                   cwd=folder, check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    dataset = folder / "out" / "tails"
    version = dataset / (dataset / "LATEST").read_text().strip()
    manifest = json.loads((version / "manifest.json").read_text())
    short = rows = short_rows = 0
    for shard in manifest["shards"]:
        with pa.memory_map(str(version / shard["path"])) as source:
            lengths = pa.ipc.open_stream(source).read_all().column("num_tokens").to_pylist()
        rows += len(lengths)
        short += sum(n for n in lengths if n < seq_len)
        short_rows += sum(1 for n in lengths if n < seq_len)
    packing = manifest.get("packing") or {}
    return {
        "partitions": sum(i["partitions"] for i in manifest["inputs"]),
        "shards": len(manifest["shards"]),
        "rows": rows,
        "tokens": manifest["tokens"],
        "short_rows": short_rows,
        "tokens_in_short_rows": short,
        "lost_percent": round(100 * short / manifest["tokens"], 4),
        "manifest_tokens_lost": packing.get("tokens_lost"),
        "manifest_lost_fraction": packing.get("lost_fraction"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="72bf97a", help="the commit before the tail shard")
    parser.add_argument("--partition-size", default="1MB", help="'default' for the recipe's")
    parser.add_argument("--seq-len", type=int, default=2048)
    args = parser.parse_args()
    corpus = WORK / "corpus"
    if not (corpus / ".done").exists():
        identity_corpus.write(corpus)
        (corpus / ".done").write_text("")
    size = None if args.partition_size == "default" else args.partition_size
    base = trees.export(trees.rev_parse(args.base), trees.CACHE / "trees")
    label = (size or "default").replace("/", "")
    for name, tree in (("base " + args.base, base), ("head", trees.REPO)):
        folder = WORK / f"{name.split()[0]}-{label}-{args.seq_len}"
        subprocess.run(["rm", "-rf", str(folder)], check=True)
        result = build(tree, folder, corpus, size, args.seq_len)
        print(f"{name}: partition_size {size or 'default'}, seq_len {args.seq_len}")
        print("  " + json.dumps(result))


if __name__ == "__main__":
    main()

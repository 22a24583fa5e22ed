"""How long a no-op `prepare()` takes on a 1,000-shard version (the bound: 50 ms).

A trainer calls `curate.prepare(recipe)` before every launch; when the version exists it
stats the inputs, reads the index entry and the manifest, and stats every file the
manifest lists (`curate.integrity`). This builds a real 1,000-shard version (a recipe with
a one-record batch and a one-byte shard size, about 10 s), then times `--calls` no-op
calls and the integrity check alone.

Usage: python -m benchmarks.noop_prepare [--shards 1000] [--calls 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import yaml


def build(folder: Path, shards: int) -> Path:
    """The 1,000-shard recipe in `folder` (its data beside it); imports no curate, so
    benchmarks.compare_commits can write it for two commits' trees."""
    data = folder / "data" / "a.jsonl"
    data.parent.mkdir(parents=True)
    with open(data, "w", encoding="utf-8") as f:
        for i in range(shards):
            f.write(json.dumps({"id": f"d{i}", "text": f"document {i} " + "word " * 20}) + "\n")
    recipe = folder / "recipe.yaml"
    recipe.write_text(
        yaml.safe_dump(
            {
                "name": "many",
                "inputs": ["data/*.jsonl"],
                "id_field": "id",
                "batch_size": 1,  # a batch per record ...
                "stages": [{"normalize": {}}],
                "output": {"root": "out", "fsync": False, "shard_size": 1},  # ... a shard each
                "engine": {"workers": 1},
            }
        )
    )
    return recipe


def main() -> None:
    import curate
    from curate import integrity

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        recipe = build(Path(tmp), args.shards)
        started = time.perf_counter()
        version = curate.prepare(recipe)
        built = time.perf_counter() - started
        n = len(version.manifest["shards"])
        assert n == args.shards, n
        calls, checks = [], []
        for _ in range(args.calls):
            started = time.perf_counter()
            again = curate.prepare(recipe)
            calls.append(time.perf_counter() - started)
            assert again.up_to_date and again.path == version.path
            started = time.perf_counter()
            assert not integrity.problems(version.path, version.manifest)
            checks.append(time.perf_counter() - started)
    ms = [c * 1000 for c in calls]
    print(f"built {n} shards in {built:.1f} s")
    print(
        f"no-op prepare(), {args.calls} calls: median {statistics.median(ms):.1f} ms, "
        f"min {min(ms):.1f}, max {max(ms):.1f}"
    )
    print(f"integrity check alone: median {statistics.median(checks) * 1000:.1f} ms")


if __name__ == "__main__":
    main()

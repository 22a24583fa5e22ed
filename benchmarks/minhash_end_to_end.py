"""Near-duplicate removal end to end: curate's minhash_dedup against datatrove's pipeline.

Both read the same JSONL corpus and write the documents they keep; each runs in its own
process tree under `benchmarks.measure` (wall, CPU of the tree, peak summed RSS), in
alternating order, with 2 workers.

- curate: `curate run` of a recipe with the one stage `minhash_dedup` at its defaults
  (exact verification) or with `verify: estimate`; Arrow shards, rejected/ side output,
  fsync on.
- datatrove: `benchmarks.minhash_datatrove` (its four steps, no verification), JSONL out.

    python -m benchmarks.minhash_end_to_end --size 100 --rounds 2 [--curate PATH]

Run it from a venv that has datatrove (`xxhash<4`), psutil and curate installed (see the
results file for the exact setup).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import yaml

from benchmarks.measure import Measurement, run_measured

WORK = Path(__file__).resolve().parent / "work"


def curate_recipe(folder: Path, corpus: Path, verify: str) -> Path:
    recipe = {
        "name": "minhash",
        "inputs": [str(corpus / "*.jsonl")],
        "id_field": "id",
        "stages": [{"minhash_dedup": {"verify": verify}}],
        "output": {"root": str(folder / "out"), "fsync": True},
        "engine": {"kind": "local", "workers": 2},
    }
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


def run_one(name: str, corpus: Path, curate: str, tag: str) -> tuple[Measurement, dict[str, int]]:
    folder = WORK / "runs" / "minhash" / name.replace(" ", "_")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    log = WORK / "logs" / f"minhash-{tag}-{name.replace(' ', '_')}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    if name.startswith("curate"):
        verify = "estimate" if "estimate" in name else "exact"
        m = run_measured([curate, "run", str(curate_recipe(folder, corpus, verify))], log)
        manifest = json.loads(
            next((folder / "out" / "minhash").glob("v*/manifest.json")).read_text()
        )
        counts = {
            "docs_in": manifest["counts"]["documents"],
            "docs_out": manifest["counts"]["written"],
        }
        stage = manifest["stages"][0]
        counts["decide_s"] = stage["details"].get("decision", {}).get("seconds", 0)
    else:
        cmd = [
            sys.executable,
            "-m",
            "benchmarks.minhash_datatrove",
            str(corpus),
            str(folder / "out"),
            str(folder / "scratch"),
        ]
        m = run_measured(cmd, log)
        counts = json.loads(m.stdout.strip().splitlines()[-1])
    return m, counts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--curate", default=str(Path(sys.executable).parent / "curate"))
    parser.add_argument("--only", action="append")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    corpus = WORK / f"corpus-{args.size}"
    mb = json.loads((corpus / "corpus.json").read_text())["bytes"] / 1e6
    names = args.only or ["curate", "curate (estimate)", "datatrove"]
    runs: dict[str, list[dict[str, float]]] = {n: [] for n in names}
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            m, counts = run_one(name, corpus, args.curate, f"{args.size}-r{r}")
            row = {
                "wall_s": m.wall_s,
                "cpu_s": m.cpu_s,
                "peak_tree_rss_mib": m.peak_tree_rss / 2**20,
                "foreign_cpu_s": m.foreign_cpu_s,
                **counts,
            }
            runs[name].append(row)
            print(f"round {r} {name}: {json.dumps(row)}", flush=True)
    print(f"corpus {mb:.1f} MB")
    for name, rows in runs.items():
        walls = sorted(x["wall_s"] for x in rows)
        wall = walls[len(walls) // 2]
        print(
            f"{name:20s} wall {wall:7.1f}s ({mb / wall:5.1f} MB/s)  docs out {rows[0]['docs_out']}"
        )
    if args.out:
        args.out.write_text(json.dumps({"corpus_mb": mb, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()

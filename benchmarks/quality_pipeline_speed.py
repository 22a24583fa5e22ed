"""CPU time of the four quality rule sets with C4's line removal, against datatrove's four
filters as a pipeline, and the same ratio for the code before the change, in one run.

Contenders, each one process on one core over the same documents (every `--every`-th
(2nd) document of `--corpus` of `benchmarks.quality_pipeline`: `docs`, its 5,500 man
pages, source and documentation files, where C4 removes most lines; `prose`, its 10,500
prose documents; or `both`), timed under
`benchmarks.measure` (CPU of the process tree, start-up and reading the JSONL included
for all):

- curate (this checkout): `quality_filter`, every default (C4 removes lines);
- curate before: the same driver on the tree of `--base` (default 35ba422, where C4 only
  decided), exported with `benchmarks.trees`;
- datatrove: GopherRepetition -> GopherQuality -> C4 -> FineWeb filters, each on the text
  the previous left (`peers/datatrove_quality.py`, run by `--datatrove-python`).

Rounds are paired (each round runs all three, in alternating order); a run during which
other work used more than 0.3 cores is repeated (`--attempts`). Reports medians and the
ratios datatrove / curate for both curate trees.

    PYTHONPATH=. /work/venv/bin/python -m benchmarks.quality_pipeline_speed --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from benchmarks.measure import run_measured, wait_for_quiet
from benchmarks.quality_corpus import WORK
from benchmarks.quality_corpus import build as build_prose
from benchmarks.quality_docs_corpus import build as build_docs
from benchmarks.trees import CACHE, export, rev_parse

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
DRIVER = HERE / "peers" / "curate_quality.py"
PEER = HERE / "peers" / "datatrove_quality.py"


def corpus(every: int, which: str) -> Path:
    """Every `every`-th document of the corpora named (`docs`, `prose` or `both`)."""
    out = WORK / f"speed-{which}-{every}.jsonl"
    if not out.exists():
        parts = {"prose": [build_prose], "docs": [build_docs], "both": [build_prose, build_docs]}
        with open(out.with_suffix(".tmp"), "w", encoding="utf-8") as f:
            for build in parts[which]:
                for k, line in enumerate(build().open(encoding="utf-8")):  # type: ignore[operator]
                    if k % every:
                        continue
                    row = json.loads(line)
                    f.write(json.dumps({"id": row["id"], "text": row["text"]}) + "\n")
        out.with_suffix(".tmp").rename(out)
    return out


def _pairs(runs: dict[str, list[dict]], a: int, b: int) -> list[tuple[float, float]]:
    """(CPU s of contender a, of contender b) in each round."""
    ra, rb = list(runs.values())[a], list(runs.values())[b]
    return [(x["cpu_s"], y["cpu_s"]) for x, y in zip(ra, rb, strict=True)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--every", type=int, default=2, help="take every n-th document")
    ap.add_argument("--corpus", choices=["docs", "prose", "both"], default="docs")
    ap.add_argument("--base", default="35ba422")
    ap.add_argument("--datatrove-python", default="/work/venv-dt/bin/python")
    ap.add_argument("--attempts", type=int, default=3)
    ap.add_argument("--patience", type=float, default=60)
    args = ap.parse_args()
    data = corpus(args.every, args.corpus)
    base_sha = rev_parse(args.base)
    base_tree = export(base_sha, CACHE / "trees")
    here = str(HERE.parent)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    contenders = {
        "curate, C4 removes lines": ([sys.executable, str(DRIVER), str(data)], here),
        f"curate before ({base_sha[:7]})": ([sys.executable, str(DRIVER), str(data)],
                                            str(base_tree)),
        "datatrove 4 filters": ([args.datatrove_python, str(PEER), str(data), "-", "1"], ""),
    }  # fmt: skip
    runs: dict[str, list[dict]] = {k: [] for k in contenders}
    log_dir = WORK / "speed-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    for r in range(args.rounds):
        names = list(contenders) if r % 2 == 0 else list(reversed(contenders))
        for name in names:
            command, path = contenders[name]
            t0 = time.time()
            best = None
            for attempt in range(args.attempts):
                wait_for_quiet(0.3, args.patience)
                log = log_dir / f"{name.split(',')[0].replace(' ', '-')}-{r}-{attempt}.log"
                m = run_measured(command, log, env={**env, "PYTHONPATH": path} if path else env)
                if best is None or m.foreign_cpu_s / m.wall_s < best.foreign_cpu_s / best.wall_s:
                    best = m
                if m.foreign_cpu_s / m.wall_s <= 0.3:
                    break
            assert best is not None
            row = {
                "cpu_s": best.user_s + best.sys_s,
                "wall_s": best.wall_s,
                "foreign": best.foreign_cpu_s / best.wall_s,
                **json.loads(best.stdout.strip().splitlines()[-1]),
            }
            runs[name].append(row)
            print(f"round {r}: {name}: {row} ({time.time() - t0:.0f}s)", flush=True)
    med = {k: statistics.median(x["cpu_s"] for x in v) for k, v in runs.items()}
    mine, before, theirs = (med[k] for k in contenders)
    mb = data.stat().st_size / 1e6
    lines = [
        "# Quality rule sets with C4 line removal: CPU time against datatrove",
        "",
        f"Corpus: {mb:.1f} MB of JSONL, {sum(1 for _ in data.open()):,} documents (every "
        f"{args.every}th document of the {args.corpus} corpus of `benchmarks.quality_pipeline`); "
        f"{args.rounds} paired rounds, "
        "medians; one process on one core each, start-up and JSON reading included.",
        "",
        "| contender | CPU s (median) | CPU s (each round) | documents kept |",
        "|---|---|---|---|",
    ]
    for name, v in runs.items():
        each = ", ".join(f"{x['cpu_s']:.1f}" for x in v)
        lines.append(f"| {name} | {med[name]:.1f} | {each} | {v[0]['kept']:,} |")
    lines += [
        "",
        f"datatrove / curate: {theirs / mine:.1f}x CPU with line removal (target: 5x); "
        f"{theirs / before:.1f}x for the code before the change, in the same run (ratios "
        "of the medians). Paired per round: "
        + "; ".join(
            f"{name} {', '.join(f'{t / c:.1f}' for t, c in pairs)} (median "
            f"{statistics.median(t / c for t, c in pairs):.1f}x)"
            for name, pairs in (
                ("with line removal", _pairs(runs, 2, 0)),
                ("before", _pairs(runs, 2, 1)),
            )
        )
        + ".",
        "",
        "Foreign load (CPU seconds of other work per wall second), medians: "
        + ", ".join(
            f"{k}: {statistics.median(x['foreign'] for x in v):.2f}" for k, v in runs.items()
        )
        + ".",
    ]
    text = "\n".join(lines) + "\n"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "quality_pipeline_speed.md").write_text(text)
    (RESULTS / "quality_pipeline_speed.json").write_text(json.dumps(runs, indent=1) + "\n")
    print(text)


if __name__ == "__main__":
    main()

"""line_dedup's memory as the corpus grows: peak RSS at 10^7 lines against 10^8.

The target (issue 23): peak RSS at 10^8 lines <= 1.25x peak RSS at 10^7. Why it holds:
the memory of a run is the workers' (a batch at a time, whatever the corpus) and the
driver's decision, which the local collective makes in buckets of `LocalSummaries.budget`
(256 MB) of shuffled rows: each counted line is one 24-byte row (hash, `_order`,
position, the document's non-blank units), 10^7 lines are 240 MB (one bucket, held
whole) and 10^8 are 2.4 GB, cut into 10 buckets whose parts and results are all spilled
to the staging folder and read back one bucket at a time. The second shuffle (removals
to their documents' partitions) and the decision files follow the same rule. So the
driver peaks near one bucket and its sort at both sizes.

10^9 lines, on paper: 24 GB of shuffled rows in ~94 buckets of 256 MB; memory still one
bucket and its sort (10^7 rows: ~0.6 GB) plus one piece of summaries being cut; disk
~2.5x the rows' share (8 GB of summaries, 24 GB spilled, the removals). What grows is
time (every row written and read twice) and the number of spill files: each piece of
summaries (one per 8 MB partition: ~7,500 of them for 60 GB of input) is cut into 94
parts, ~700,000 files of ~35 KB per shuffle. That works but is slow on some
filesystems; one appending writer per bucket would make it 94 files (not done: at 10^8,
7,500 files of ~300 KB are fine). The second shuffle (removals to their partitions) is
at most one partition's removals per piece. The Ray engine holds the buckets in its
object store instead. A unit hash is xxh3-64: among 10^9 distinct lines the chance of
one colliding pair is ~3%, and a collision only merges two lines' document counts.

Measured (2026-12-04, shared 2-core VM under load, `--decide-only 16`: the decision
alone with a 16 MB budget, so 10^6 and 10^7 lines are both bucketed): peak RSS 183 MiB
at 10^6 lines, 207 MiB at 10^7 (1.13x); with small parts kept in memory, as before this
change, 194 and 545 MiB (2.81x). End to end at 10^5 and 10^6 lines (both one bucket,
so not the target's regime): 402 and 612 MiB summed over the tree.

End to end, 10^7 against 10^8 lines (2026-12-04, the command below, busy 2-core VM):
before, peak tree RSS 1620 -> 2516 MiB (1.55x), one process 1117 -> 2516 MiB (2.25x),
missing the target. Sampling each process's RSS with the driver's steps marked showed the
decision was not the cause: the driver peaked at 1149 MiB (10^7: its one bucket and the
sort in `repeated`) and 1253 MiB (10^8: one of 9 buckets), 1.09x. The 2.5 GB came after
the last pass, at publish: the lineage side table was built by a polars hash join of
every document's staged row with its place in the shards (5 million documents: 2.2 GB
anon for ~25 s). It now pairs the rows as it reads them when both list the same ids in
the same order (`curate.lineage.publish`; same bytes). After: peak tree RSS 1613 -> 1673
MiB (1.04x), one process 1129 -> 1229 MiB (1.09x), the driver's decision at both sizes;
decide 9.0 and 122.9 s, wall 37 and 414 s (load 3-4 from other sessions). Figures and
phases: `benchmarks/results/line_dedup_memory.md`.

The corpus: documents of 20 lines of ~60 bytes (8 words of a 50,000-word vocabulary);
30% of lines are drawn from 2,000 boilerplate lines, the rest are unique. Parquet files
of 200,000 documents. Each size runs `curate run` with one `line_dedup: {}` stage,
2 workers, under `benchmarks.measure` (peak summed RSS of the tree, peak RSS of one
process). Free disk is checked first (input, staged rows, summaries, spill, output:
about 4x the input); 10^8 lines is ~6 GB of input.

    python -m benchmarks.line_dedup_memory --lines 1000000 --lines 10000000
    python -m benchmarks.line_dedup_memory --lines 10000000 --lines 100000000  # quiet machine
    python -m benchmarks.line_dedup_memory --decide-only 16 --lines 1000000 --lines 10000000

`--decide-only BUDGET_MIB` measures the decision alone (summaries made directly, no text)
in a process whose collective budget is BUDGET_MIB: 16 MB puts 10^6 and 10^7 lines in
the bucketed regime that 10^7 and 10^8 reach at 256 MB, at a tenth of the disk.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml

from benchmarks.measure import run_measured

WORK = Path(__file__).resolve().parent / "work"
SEED = 20261204
LINES_PER_DOC = 20
WORDS_PER_LINE = 8
FILE_DOCS = 200_000
BOILERPLATE = 2_000
SHARE = 0.3
DISK_FACTOR = 4


def vocabulary(rng: np.random.Generator, n: int = 50_000) -> pa.Array:
    lengths = rng.integers(3, 11, n)
    letters = rng.integers(ord("a"), ord("z") + 1, int(lengths.sum()), dtype=np.uint8)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(letters))


def lines_of(rng: np.random.Generator, vocab: pa.Array, n: int) -> pa.Array:
    words = pc.take(vocab, pa.array(rng.integers(0, len(vocab), n * WORDS_PER_LINE)))
    offsets = pa.array(np.arange(0, (n + 1) * WORDS_PER_LINE, WORDS_PER_LINE, dtype=np.int32))
    return pc.binary_join(pa.ListArray.from_arrays(offsets, words), " ")


def synthetic_file(
    rng: np.random.Generator, vocab: pa.Array, boiler: pa.Array, first: int, docs: int
) -> pa.Table:
    n = docs * LINES_PER_DOC
    lines = lines_of(rng, vocab, n)
    shared = rng.random(n) < SHARE
    which = rng.integers(0, len(boiler), int(shared.sum()))
    mask = pa.array(shared)
    lines = pc.replace_with_mask(lines, mask, pc.take(boiler, pa.array(which)))
    offsets = pa.array(np.arange(0, n + 1, LINES_PER_DOC, dtype=np.int32))
    text = pc.binary_join(pa.ListArray.from_arrays(offsets, lines), "\n")
    ids = pc.binary_join_element_wise("d", pa.array(np.arange(first, first + docs).astype(str)), "")
    return pa.table({"id": ids, "text": text})


def build(lines: int) -> Path:
    folder = WORK / f"line-dedup-{lines}"
    done = folder / "done.json"
    if done.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    rng = np.random.default_rng(SEED)
    vocab = vocabulary(rng)
    boiler = lines_of(rng, vocab, BOILERPLATE)
    docs = lines // LINES_PER_DOC
    for k, first in enumerate(range(0, docs, FILE_DOCS)):
        n = min(FILE_DOCS, docs - first)
        table = synthetic_file(rng, vocab, boiler, first, n)
        pq.write_table(table, folder / f"part-{k:05d}.parquet", row_group_size=50_000)
    done.write_text(json.dumps({"lines": lines}))
    return folder


def check_disk(lines: int) -> None:
    need = lines * 60 * DISK_FACTOR  # ~60 bytes a line
    free = shutil.disk_usage(WORK.parent).free
    if free < need:
        sys.exit(f"{lines:,} lines need about {need / 1e9:.1f} GB free; {free / 1e9:.1f} GB are")


def run(lines: int, curate: str) -> dict[str, object]:
    check_disk(lines)
    folder = build(lines)
    run_dir = WORK / "runs" / "line-dedup-memory" / str(lines)
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    recipe = {
        "name": "lines",
        "inputs": [str(folder / "*.parquet")],
        "id_field": "id",
        "stages": [{"line_dedup": {}}],
        "output": {"root": str(run_dir / "out"), "fsync": False},
        "engine": {"kind": "local", "workers": 2},
    }
    (run_dir / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    log = WORK / "logs" / f"line-dedup-memory-{lines}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    m = run_measured([curate, "run", str(run_dir / "recipe.yaml")], log)
    manifest = json.loads(next((run_dir / "out" / "lines").glob("v*/manifest.json")).read_text())
    stage = manifest["stages"][0]
    details = stage["details"]
    result = {
        "lines": lines,
        "input_mb": round(sum(p.stat().st_size for p in folder.glob("*.parquet")) / 1e6, 1),
        "wall_s": round(m.wall_s, 1),
        "cpu_s": round(m.cpu_s, 1),
        "peak_tree_rss_mib": round(m.peak_tree_rss / 2**20),
        "peak_proc_rss_mib": round(m.peak_proc_rss / 2**20),
        "decide_s": details["decision"]["seconds"],
        "lines_summarized": details["lines_summarized"],
        "repeated_lines": details["repeated_lines"],
        "lines_removed": stage["counters"].get("lines_removed", 0),
        "changed": stage["changed"],
    }
    shutil.rmtree(run_dir / "out", ignore_errors=True)
    return result


def decide_only(lines: int, budget: int) -> dict[str, object]:
    """The decision alone, in a fresh process, with the collective's budget set to `budget`
    bytes: summary files of `lines` unit hashes (documents of 20, 30% from 2,000 shared
    hashes) written as a first pass would, then decided and its removals counted; peak
    RSS of that process (`ru_maxrss`). With a small budget, sizes that fit this machine
    show the bucketed regime that 10^8 lines reach at the default 256 MB."""
    code = f"""
import resource, sys, tempfile, time
from pathlib import Path
import numpy as np, pyarrow as pa
from curate.collective.local import LocalSummaries
from curate.io.batches import ID, ORDER, order_column
from curate.line_dedup import decide as pieces
from curate.stages.line_dedup import LineDedup, LineDedupParams
lines, budget = {lines}, {budget}
folder = Path(tempfile.mkdtemp(dir={str(WORK)!r}))
rng = np.random.default_rng({SEED})
files, per_file = [], 500_000
for p, first in enumerate(range(0, lines, per_file)):
    n = min(per_file, lines - first)
    h = rng.integers(1, 2**63, n, dtype=np.uint64)
    shared = rng.random(n) < {SHARE}
    h[shared] = rng.integers(0, {BOILERPLATE}, int(shared.sum())).astype(np.uint64)
    docs = n // {LINES_PER_DOC}
    offsets = pa.array(np.arange(0, docs * {LINES_PER_DOC} + 1, {LINES_PER_DOC}, dtype=np.int32))
    table = pa.table({{ID: pa.array([f"d{{first + i}}" for i in range(docs)]),
        ORDER: pa.array(order_column(0, 0, docs), pa.uint64()),
        pieces.HASHES: pa.ListArray.from_arrays(offsets, pa.array(h[: docs * {LINES_PER_DOC}])),
        pieces.NONBLANK: pa.array(np.full(docs, {LINES_PER_DOC}, np.uint32))}})
    path = folder / f"summary-{{p}}.arrow"
    with pa.ipc.new_file(str(path), table.schema) as w:
        w.write_table(table)
    files.append((path, p))
    del table, h
LocalSummaries.budget = budget
summaries = LocalSummaries.from_files(files, folder / "spill")
started = time.perf_counter()
decision, stats = LineDedup(LineDedupParams()).decide_with_stats(summaries)
rows = decision.count()
summaries.close()
print(rows, stats["lines_to_remove"], round(time.perf_counter() - started, 1),
      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
import shutil; shutil.rmtree(folder)
"""
    WORK.mkdir(parents=True, exist_ok=True)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    rows, removed, seconds, rss = out.stdout.split()
    return {"lines": lines, "budget_mib": budget >> 20, "decision_rows": int(rows),
            "lines_to_remove": int(removed), "decide_s": float(seconds),
            "peak_rss_mib": int(rss)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, action="append")
    parser.add_argument("--curate", default=str(Path(sys.executable).parent / "curate"))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--decide-only", type=int, metavar="BUDGET_MIB",
                        help="measure the decision alone with this collective budget")  # fmt: skip
    args = parser.parse_args()
    results = []
    for lines in args.lines or [1_000_000]:
        if args.decide_only:
            result = decide_only(lines, args.decide_only << 20)
            print(json.dumps(result), flush=True)
            results.append(result)
            continue
        result = run(lines, args.curate)
        print(json.dumps(result), flush=True)
        results.append(result)
    if len(results) > 1:
        small, large = results[0], results[-1]
        for key in ("peak_tree_rss_mib", "peak_proc_rss_mib", "peak_rss_mib"):
            if key not in small:
                continue
            ratio = int(large[key]) / max(int(small[key]), 1)  # type: ignore[call-overload]
            print(f"{key}: {large['lines']:,} lines / {small['lines']:,} lines = {ratio:.2f}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

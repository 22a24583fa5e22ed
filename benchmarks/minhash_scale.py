"""minhash_dedup at scale: 1 M to 10 M synthetic documents, time and peak memory.

The synthetic set: documents of 30-80 words drawn from a 50,000-word vocabulary (about
390 bytes each); 20% are near-duplicates of an earlier original of their file (same
length, one word replaced: Jaccard 0.7-0.95 over word 5-grams); the first file also
holds one cluster of 100,000 variants of a single document. Files are Parquet, 500,000
documents each, in row groups of 100,000.

Each size runs `curate run` on a recipe whose only stage is `minhash_dedup` at its
defaults (exact verification), 2 workers, under `benchmarks.measure` (wall, CPU of the
tree, peak summed RSS, peak RSS of one process). The manifest gives the barrier's decide
time and its cluster figures. Bytes per document on disk are measured on a summary file
of 100,000 documents written as the engine writes them.

    python -m benchmarks.minhash_scale --docs 1000000 --docs 10000000
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml

from benchmarks.measure import run_measured

WORK = Path(__file__).resolve().parent / "work"
FILE_DOCS = 500_000
SEED = 20261203


def vocabulary(rng: np.random.Generator, n: int = 50_000) -> pa.Array:
    lengths = rng.integers(2, 11, n)
    letters = rng.integers(ord("a"), ord("z") + 1, int(lengths.sum()), dtype=np.uint8)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(letters))


def synthetic_file(
    rng: np.random.Generator, vocab: pa.Array, first: int, n: int, cluster: int
) -> pa.Table:
    lengths = rng.integers(30, 81, n)
    # 20% near-duplicates of an earlier original (not itself a copy) of this file, placed
    # after the cluster; the cluster: documents 1..cluster copy document 0, 80 words
    copies = np.flatnonzero(rng.random(n) < 0.2)
    copies = copies[copies > cluster + 1]
    source = np.zeros(n, np.int64) - 1
    if cluster:
        lengths[: cluster + 1] = 80
        source[1 : cluster + 1] = 0
    is_original = np.ones(n, bool)
    is_original[: cluster + 1] = False
    is_original[copies] = False
    originals = np.flatnonzero(is_original)  # (np.setdiff1d: slow np.unique in numpy 2.4)
    pick = rng.random(len(copies))
    # an original before the copy: uniform over the originals that precede it
    before = np.searchsorted(originals, copies)
    source[copies] = originals[(pick * before).astype(np.int64)]
    copied = source >= 0
    lengths[copied] = lengths[source[copied]]
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    ids = rng.integers(0, len(vocab), int(offsets[-1])).astype(np.int32)
    # copy word by word (vectorised), then change one word of every copy
    docs = np.flatnonzero(copied)
    counts = lengths[docs]
    within = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    target = np.repeat(offsets[docs], counts) + within
    ids[target] = ids[np.repeat(offsets[source[docs]], counts) + within]
    hit = offsets[docs] + (rng.random(len(docs)) * counts).astype(np.int64)
    ids[hit] = rng.integers(0, len(vocab), len(docs))
    words = pc.take(vocab, pa.array(ids))
    lists = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), words)
    text = pc.binary_join(lists, " ")
    doc_ids = pc.binary_join_element_wise(
        "s", pa.array(np.arange(first, first + n).astype(str)), ""
    )
    return pa.table({"id": doc_ids, "text": text})


def build(docs: int) -> Path:
    folder = WORK / f"minhash-synthetic-{docs}"
    done = folder / "done.json"
    if done.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    rng = np.random.default_rng(SEED)
    vocab = vocabulary(rng)
    for k, first in enumerate(range(0, docs, FILE_DOCS)):
        n = min(FILE_DOCS, docs - first)
        table = synthetic_file(rng, vocab, first, n, 100_000 if k == 0 else 0)
        pq.write_table(table, folder / f"part-{k:05d}.parquet", row_group_size=100_000)
    done.write_text(json.dumps({"docs": docs}))
    return folder


def summary_bytes_per_doc(folder: Path, tmp: Path) -> dict[str, float]:
    """Size of a summary file of the first 100,000 documents, per document, by column."""
    from curate.stages.base import ORDER
    from curate.stages.minhash_dedup import MinHashDedup, MinHashDedupParams

    table = pq.read_table(next(iter(sorted(folder.glob("*.parquet")))))[:100_000]
    table = table.append_column(ORDER, pa.array(np.arange(table.num_rows, dtype=np.uint64)))
    out: dict[str, float] = {}
    for verify in ("exact", "estimate"):
        stage = MinHashDedup(MinHashDedupParams(verify=verify))
        path = tmp / f"summary-{verify}.arrow"
        with pa.ipc.new_file(str(path), stage.summary_schema()) as w:
            for batch in table.to_batches(max_chunksize=16_384):
                w.write_batch(stage.summarize(batch))
        out[f"disk_{verify}"] = path.stat().st_size / table.num_rows
        path.unlink()
    return out


def run(docs: int, curate: str) -> dict[str, object]:
    folder = build(docs)
    run_dir = WORK / "runs" / "minhash-scale" / str(docs)
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    recipe = {
        "name": "scale",
        "inputs": [str(folder / "*.parquet")],
        "id_field": "id",
        "stages": [{"minhash_dedup": {}}],
        "output": {"root": str(run_dir / "out"), "fsync": False, "rejected": True},
        "engine": {"kind": "local", "workers": 2},
    }
    (run_dir / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    log = WORK / "logs" / f"minhash-scale-{docs}.log"
    m = run_measured([curate, "run", str(run_dir / "recipe.yaml")], log)
    manifest = json.loads(next((run_dir / "out" / "scale").glob("v*/manifest.json")).read_text())
    stage = manifest["stages"][0]
    details = stage["details"]
    result = {
        "docs": docs,
        "input_mb": sum(p.stat().st_size for p in folder.glob("*.parquet")) / 1e6,
        "wall_s": m.wall_s,
        "cpu_s": m.cpu_s,
        "peak_tree_rss_mib": m.peak_tree_rss / 2**20,
        "peak_proc_rss_mib": m.peak_proc_rss / 2**20,
        "decide_s": details["decision"]["seconds"],
        "decide_phases_s": details.get("decide_seconds"),
        "timings": manifest["timings"],
        "written": manifest["counts"]["written"],
        **{k: details[k] for k in ("candidate_pairs", "verified_pairs", "clusters", "removed")},
        "largest_cluster": details["largest_cluster"],
        "cluster_sizes": details["cluster_sizes"],
    }
    shutil.rmtree(run_dir / "out", ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, action="append")
    parser.add_argument("--curate", default=str(Path(sys.executable).parent / "curate"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results = []
    for docs in args.docs or [1_000_000]:
        result = run(docs, args.curate)
        tmp = WORK / "runs" / "minhash-scale"
        result.update(summary_bytes_per_doc(build(docs), tmp))
        print(json.dumps(result), flush=True)
        results.append(result)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

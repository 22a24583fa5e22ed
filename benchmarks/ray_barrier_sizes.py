"""What a barrier's summary and shuffle cost per document, measured on the benchmark corpus.

The paper analysis in `results/ray_barrier_memory.md` scales these figures to a billion
documents: bytes per document of each summary column (as the workers spill them), and
the bytes per document each of the Ray engine's collective operations moves through the
object store. Runs the sample recipe's normalize and filter_length first, as a run would.

    /work/venv/bin/python -m benchmarks.ray_barrier_sizes --docs 4000
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pyarrow as pa

from benchmarks.ray_scaling import STAGES
from curate.io.batches import ID
from curate.stages.base import ORDER, StageContext
from curate.stages.registry import resolve

HERE = Path(__file__).resolve().parent


def load(corpus: Path, docs: int) -> pa.RecordBatch:
    rows = []
    for path in sorted(corpus.glob("*.jsonl")):
        with open(path, encoding="utf-8") as f:
            for line in f:
                rows.append(json.loads(line))
                if len(rows) == docs:
                    break
        if len(rows) == docs:
            break
    order = np.arange(len(rows), dtype=np.uint64)
    return pa.record_batch(
        {
            ID: pa.array([r["id"] for r in rows], pa.string()),
            "text": pa.array([r["text"] for r in rows], pa.string()),
            ORDER: pa.array(order, pa.uint64()),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=HERE / "work" / "corpus-100")
    parser.add_argument("--docs", type=int, default=4000)
    args = parser.parse_args()
    batch = load(args.corpus, args.docs)
    text_bytes = batch.column("text").nbytes / batch.num_rows
    stages = []
    for i, entry in enumerate(STAGES):
        ((name, params),) = entry.items()
        cls = resolve(name)
        stages.append(cls(cls.Params(**params), StageContext(position=i)))
    for stage in stages[:2]:  # normalize, filter_length
        batch = stage.process(batch).batch
    n = batch.num_rows
    print(f"{n} documents, {text_bytes:.0f} bytes of text each on average")
    for stage in stages[2:]:  # exact_dedup, minhash_dedup
        summary = stage.summarize(batch)  # type: ignore[attr-defined]
        columns = {f.name: summary.column(i).nbytes / n for i, f in enumerate(summary.schema)}
        bands = [c for c in columns if c.startswith("band_")]
        print(f"\n{stage.name}: {summary.nbytes / n:.0f} bytes of summary per document")
        for name, size in columns.items():
            if not name.startswith("band_"):
                print(f"  {name:12s} {size:8.1f}")
        if bands:
            print(f"  {len(bands)} band keys {sum(columns[b] for b in bands):6.1f}")
            # star_edges moves (slot uint16, key uint64, _order uint64, slot hash uint64)
            # per band per document
            print(f"  star_edges shuffle: {len(bands) * 26} bytes per document")
        else:
            key = next(c for c in columns if c not in (ID, ORDER))
            moved = columns[key] + columns[ID] + columns[ORDER]
            print(f"  first_by_key shuffle ({key}, id, _order): {moved:.0f} bytes per document")


if __name__ == "__main__":
    main()

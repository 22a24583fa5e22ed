"""The decision of classifier_buckets alone: weighted percentile edges and each document's
bucket over N summary rows, against a full sort of every score in one process.

The stage never sorts: two folds of 16-bit histograms over the scores' order-preserving
keys find each edge exactly (`curate.classify.percentiles`), so no node holds every
score. This measures what that costs next to the obvious way (argsort all scores, a
cumulative sum of the weights, searchsorted the targets), and asserts both give the same
edges and the same buckets. Scores: a fastText-like mix (most near 0 or 1, a tenth rounded
to 3 decimals for heavy ties); weights: characters, log-normal around 2,000.

    PYTHONPATH=. /work/venv/bin/python -m benchmarks.classifier_buckets_decide --docs 10000000
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import pyarrow as pa

from curate.classify import percentiles as pct
from curate.collective.local import LocalSummaries
from curate.io.batches import ORDER, order_column


def corpus(n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    scores = rng.beta(0.3, 0.6, n).astype(np.float32)
    tied = rng.random(n) < 0.1
    scores[tied] = np.round(scores[tied], 3)
    weights = np.maximum(rng.lognormal(7.6, 1.0, n), 1).astype(np.int64)
    return scores, weights


def summaries(scores: np.ndarray, weights: np.ndarray, pieces: int) -> LocalSummaries:
    n = len(scores)
    per = -(-n // pieces)
    tables = []
    for p, start in enumerate(range(0, n, per)):
        end = min(start + per, n)
        tables.append(pa.table({
            ORDER: pa.array(order_column(p, 0, end - start), pa.uint64()),
            pct.KEY: pa.array(pct.score_keys(scores[start:end]), pa.uint32()),
            pct.WEIGHT: pa.array(weights[start:end], pa.int64()),
        }))  # fmt: skip
    return LocalSummaries.from_tables(tables)


def by_sorting(scores: np.ndarray, weights: np.ndarray, cuts: list[float]) -> np.ndarray:
    """The edges from one sort of every key: the lowest key whose cumulative weight (ties
    summed) reaches each target."""
    keys = pct.score_keys(scores)
    order = np.argsort(keys, kind="stable")
    through = np.cumsum(weights[order])
    targets = np.array([c * int(weights.sum()) / 100 for c in cuts])
    return keys[order][np.searchsorted(through, targets, side="left")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=10_000_000)
    ap.add_argument("--pieces", type=int, default=64)
    ap.add_argument("--buckets", type=int, default=20)
    args = ap.parse_args()
    scores, weights = corpus(args.docs)
    cuts = [100 * i / args.buckets for i in range(1, args.buckets)]
    held = summaries(scores, weights, args.pieces)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    wall, cpu = time.perf_counter(), time.process_time()
    keyed = held.rows([pct.KEY, pct.WEIGHT])
    edges, total, documents = pct.find_edges(keyed, cuts)
    counts = np.zeros(args.buckets, np.int64)
    for d, _ in keyed.fold(pct.bucket_counts, [(pct.KEY, edges)], args.buckets):
        counts += d
    ours = time.perf_counter() - wall, time.process_time() - cpu
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss
    wall, cpu = time.perf_counter(), time.process_time()
    sorted_edges = by_sorting(scores, weights, cuts)
    sorted_counts = np.bincount(pct.buckets_of(pct.score_keys(scores), sorted_edges),
                                minlength=args.buckets)  # fmt: skip
    theirs = time.perf_counter() - wall, time.process_time() - cpu
    assert edges is not None and np.array_equal(edges, sorted_edges), "edges differ"
    assert np.array_equal(counts, sorted_counts), "buckets differ"
    print(f"{documents:,} summary rows in {args.pieces} pieces, {args.buckets} buckets, "
          f"total weight {total:,}: identical edges and buckets")  # fmt: skip
    print(f"folds (curate)   wall {ours[0]:6.2f}s  CPU {ours[1]:6.2f}s  "
          f"peak RSS grew {grown / 1024:.0f} MiB")  # fmt: skip
    print(f"one full sort    wall {theirs[0]:6.2f}s  CPU {theirs[1]:6.2f}s")
    print("edges:", ", ".join(f"{v:.4g}" for v in pct.key_scores(edges)))


if __name__ == "__main__":
    main()

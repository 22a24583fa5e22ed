"""Precision, recall and F1 of minhash_dedup on planted near-duplicates.

`curate.minhash.planted` builds the corpus (scattered edits, inserted passages, reordered
paragraphs, boilerplate headers, licences with another copyright line, edits of edits,
distractors below the threshold) and its exact ground truth by brute force. Recall is per
true duplicate (a member of a connected component of pairs with exact Jaccard >= 0.8,
other than its first document); precision is per removed document (it has a partner with
exact Jaccard >= 0.7). Each setting runs through `Pipeline.process`, the stage's own code.

    python -m benchmarks.minhash_quality [--bases 2000] [--seeds 3]
"""

from __future__ import annotations

import argparse
import json
import time

from curate import Pipeline
from curate.minhash.planted import ground_truth, planted_corpus, score

SETTINGS: list[tuple[str, dict[str, object]]] = [
    ("defaults (exact, 17x7)", {}),
    ("verify: estimate", {"verify": "estimate"}),
    ("datasketch equal weights (9x13), exact", {"bands": 9, "rows": 13}),
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bases", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out")
    args = parser.parse_args()
    rows = []
    for seed in range(args.seeds):
        corpus = planted_corpus(args.bases, seed=seed)
        truth = ground_truth(corpus.docs)
        docs = [{"id": d["id"], "text": d["text"]} for d in corpus.docs]
        for name, params in SETTINGS:
            started = time.perf_counter()
            result = Pipeline().add("minhash_dedup", **params).process(docs)
            removed = set(result.rejected.column("id").to_pylist())
            got = score(truth, removed)
            got |= {"setting": name, "seed": seed, "documents": len(docs)}
            got["seconds"] = round(time.perf_counter() - started, 2)
            rows.append(got)
            print(json.dumps(got), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

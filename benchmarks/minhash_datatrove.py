"""datatrove's four-step MinHash dedup, as its own example runs it, for the side-by-side.

Signatures (`MinhashDedupSignature`, 2 tasks on 2 workers), buckets (`MinhashDedupBuckets`,
one task per bucket on 2 workers), clusters (`MinhashDedupCluster`, 1 task), then a second
read of the input that drops the removed documents (`MinhashDedupFilter`) and writes JSONL.
`MinhashConfig` defaults: word 5-grams after datatrove's text simplification and spaCy-free
word splitting of its English tokenizer, 14 buckets x 8 hashes, 64-bit hashes. It does no
verification of candidate pairs.

Usage (from a venv with `datatrove[io,processing]` and `xxhash<4`):
    python -m benchmarks.minhash_datatrove INPUT_DIR OUTPUT_DIR SCRATCH_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup.minhash import (
    MinhashConfig,
    MinhashDedupBuckets,
    MinhashDedupCluster,
    MinhashDedupFilter,
    MinhashDedupSignature,
)
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter

WORKERS = 2


def run(inputs: Path, output: Path, scratch: Path) -> dict[str, int]:
    config = MinhashConfig()

    def reader() -> JsonlReader:
        return JsonlReader(str(inputs), glob_pattern="*.jsonl", compression=None)

    signatures = LocalPipelineExecutor(
        pipeline=[reader(), MinhashDedupSignature(str(scratch / "sigs"), config=config)],
        tasks=WORKERS,
        workers=WORKERS,
        logging_dir=str(scratch / "logs-1"),
    )
    buckets = LocalPipelineExecutor(
        pipeline=[
            MinhashDedupBuckets(str(scratch / "sigs"), str(scratch / "buckets"), config=config)
        ],
        tasks=config.num_buckets,
        workers=WORKERS,
        logging_dir=str(scratch / "logs-2"),
        depends=signatures,
    )
    clusters = LocalPipelineExecutor(
        pipeline=[
            MinhashDedupCluster(str(scratch / "buckets"), str(scratch / "remove"), config=config)
        ],
        tasks=1,
        logging_dir=str(scratch / "logs-3"),
        depends=buckets,
    )
    filtering = LocalPipelineExecutor(
        pipeline=[
            reader(),
            MinhashDedupFilter(str(scratch / "remove")),
            JsonlWriter(str(output), compression=None),
        ],
        tasks=WORKERS,
        workers=WORKERS,
        logging_dir=str(scratch / "logs-4"),
        depends=clusters,
    )
    filtering.run()
    steps = json.loads((scratch / "logs-4" / "stats.json").read_text())
    return {
        "docs_in": steps[0]["stats"]["documents"]["total"],
        "docs_out": steps[-1]["stats"]["total"],
    }


def main() -> None:
    source, target, scratch = (Path(arg) for arg in sys.argv[1:4])
    print(json.dumps(run(source, target, scratch)))


if __name__ == "__main__":
    main()

"""curate's `quality_filter` (every default) over a JSONL corpus, in one process: the curate
side of `benchmarks.quality_pipeline_speed`. Run by file path with PYTHONPATH=<tree>, so the
same driver times this checkout and an earlier commit's tree (only `QualityFilter`,
`QualityFilterParams` and `process` are used, which every version has).

    PYTHONPATH=<tree> python benchmarks/peers/curate_quality.py CORPUS.jsonl [c4 params as JSON]
"""

from __future__ import annotations

import json
import sys

import pyarrow as pa

from curate.stages.quality_filter import QualityFilter, QualityFilterParams

BATCH = 1000


def main() -> None:
    c4 = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    stage = QualityFilter(QualityFilterParams(c4=c4))
    with open(sys.argv[1], encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    kept = chars = 0
    for start in range(0, len(rows), BATCH):
        chunk = rows[start : start + BATCH]
        batch = pa.record_batch(
            {"id": [r["id"] for r in chunk], "text": [r["text"] for r in chunk]}
        )
        out = stage.process(batch).batch
        kept += out.num_rows
        chars += sum(len(t) for t in out.column("text").to_pylist())
    print(json.dumps({"kept": kept, "characters": chars}))


if __name__ == "__main__":
    main()

"""Hugging Face `datasets` doing normalize + exact dedup the way its docs suggest.

``load_dataset("json")`` into a fresh cache folder, a batched ``.map`` on 2 processes
that normalizes and adds a digest column, then a first-occurrence mask over the
digests (polars ``is_first_distinct``, which keeps input order), ``select`` and
``save_to_disk``. The digest is computed inside the parallel map so the only
single-process step is the mask over 16-byte values.

Usage: python -m benchmarks.peers.hf_datasets INPUT_DIR OUTPUT_DIR CACHE_DIR
"""

from __future__ import annotations

import json
import os
import sys
import unicodedata
from pathlib import Path

import numpy as np
import polars as pl
import xxhash

# Local files only: keep `datasets` (which reads these on import) off the Hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
import datasets


def normalize(batch: dict[str, list]) -> dict[str, list]:
    texts = [unicodedata.normalize("NFC", text) for text in batch["text"]]
    digests = [xxhash.xxh3_128_digest(text.encode()) for text in texts]
    return {"text": texts, "digest": digests}


def run(inputs: list[Path], output: Path, cache: Path) -> dict[str, int]:
    datasets.disable_progress_bars()
    files = [str(path) for path in inputs]
    ds = datasets.load_dataset("json", data_files=files, split="train", cache_dir=str(cache))
    ds = ds.map(normalize, batched=True, num_proc=2)
    digests = pl.from_arrow(ds.data.column("digest"))
    keep = np.flatnonzero(digests.is_first_distinct().to_numpy())
    out = ds.select(keep).remove_columns("digest")
    out.save_to_disk(str(output))
    return {"docs_in": len(ds), "docs_out": len(out)}


def main() -> None:
    source, target, cache = (Path(arg) for arg in sys.argv[1:4])
    print(json.dumps(run(sorted(source.glob("*.jsonl")), target, cache)))


if __name__ == "__main__":
    main()

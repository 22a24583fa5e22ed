"""Speed of the classifier stage with a BERT-base-shaped model on CPU against
`transformers.pipeline` with its default batching.

The model is BertForSequenceClassification of BERT-base shape (12 layers, hidden 768,
12 heads, intermediate 3072; 3 labels), built as the tests build it (a WordPiece
tokenizer trained on the documents, random weights and a few fine-tuning steps), max
length 512. Documents: the labelled real documents of the tests (Python sources, the
sample web pages, copyright files), the first `--docs`. Both sides run with torch's
threads set to the worker's CPU share (`--threads`, default 1: one worker per core).
The stage batches by length (`batch_size` 32); the pipeline runs as FineWeb-Edu's users
call it, `pipeline("text-classification", model, truncation=True, top_k=None)` with its
default batching (one document per forward pass). Scores are asserted equal within 1e-4.

    PYTHONPATH=. /work/venv/bin/python -m benchmarks.classifier_hf --docs 200
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "classify"))

from bert_model import LABELS, build_model
from labelled_docs import labelled_documents


def stage(folder: Path, texts: list[str], threads: int) -> tuple[np.ndarray, float, float]:
    from curate.stages.classifier import Classifier, ClassifierParams

    spec = {"model": str(folder), "name": "edu", "label": "web", "batch_size": 32}
    st = Classifier(ClassifierParams(models=[spec], threads=threads))
    st.setup()
    batch = pa.RecordBatch.from_pydict({"id": [str(i) for i in range(len(texts))], "text": texts})
    wall, cpu = time.perf_counter(), time.process_time()
    scores = st.process(batch).batch.column("edu_score").to_numpy()
    return scores, time.perf_counter() - wall, time.process_time() - cpu


def peer(folder: Path, texts: list[str], threads: int) -> tuple[np.ndarray, float, float]:
    import torch
    from transformers import pipeline

    torch.set_num_threads(threads)
    classify = pipeline("text-classification", model=str(folder), truncation=True, top_k=None,
                        device="cpu")  # fmt: skip
    wall, cpu = time.perf_counter(), time.process_time()
    found = classify(texts)
    scores = np.array([next(d["score"] for d in doc if d["label"] == "web") for doc in found])
    return scores.astype(np.float32), time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--layers", type=int, default=12)
    args = ap.parse_args()
    docs = labelled_documents()
    texts = [t for _, t in docs[: args.docs]]
    size = sum(len(t.encode()) for t in texts) / 1e6
    with tempfile.TemporaryDirectory() as tmp:
        folder = build_model(Path(tmp) / "bert", docs[:400], layers=args.layers,
                             max_length=512, steps=3)  # fmt: skip
        ours, wall_s, cpu_s = stage(folder, texts, args.threads)
        theirs, wall_p, cpu_p = peer(folder, texts, args.threads)
    assert LABELS[2] == "web"
    diff = float(np.abs(ours - theirs).max())
    assert diff < 1e-4, diff
    print(f"{len(texts)} documents, {size:.2f} MB, {args.layers} layers, threads {args.threads}; "
          f"max |score difference| {diff:.2e}")  # fmt: skip
    for name, wall, cpu in (("pipeline", wall_p, cpu_p), ("curate classifier", wall_s, cpu_s)):
        print(f"{name:18} {len(texts) / wall:7.2f} docs/s  wall {wall:7.2f}s  CPU {cpu:7.2f}s")
    print(f"speed-up (wall): {wall_p / wall_s:.2f}x")


if __name__ == "__main__":
    main()

"""Speed of the classifier stage with a fastText model against fasttext-predict alone.

Same documents for both (the first S MB of `benchmarks.corpus`'s source files: man
pages, /usr/share/doc, Python sources), the same model (trained here by Debian's
`fasttext` command on other documents, labelled by source root: man, doc, py0, py1), and
identical scores asserted. The stage runs `process` over record batches of 1,000
documents, as a worker does (text column in, score column out); the peer is the loop DCLM runs,
`model.predict(" ".join(text.strip().splitlines()), k=-1)` per document. Reports MB/s
and CPU-seconds of each, one process, best of `--rounds`.

    PYTHONPATH=. /work/venv/bin/python -m benchmarks.classifier_fasttext --mb 20
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from benchmarks.corpus import source_documents

MB = 1_000_000


def documents(mb: int) -> list[tuple[str, str]]:
    return [(doc_id.split(":")[0], text) for doc_id, text, _ in source_documents(mb * MB)]


def train(docs: list[tuple[str, str]], folder: Path) -> Path:
    train_file = folder / "train.txt"
    with open(train_file, "w", encoding="utf-8") as f:
        for label, text in docs:
            f.write(f"__label__{label} {' '.join(text.strip().splitlines())}\n")
    subprocess.run(["fasttext", "supervised", "-input", str(train_file), "-output",
                    str(folder / "model"), "-dim", "64", "-wordNgrams", "2", "-epoch", "5",
                    "-thread", "2", "-verbose", "0"], check=True)  # fmt: skip
    return folder / "model.bin"


def peer(model_path: Path, texts: list[str], label: str) -> tuple[np.ndarray, float, float]:
    import fasttext

    model = fasttext.load_model(str(model_path))
    wall, cpu = time.perf_counter(), time.process_time()
    scores = np.zeros(len(texts), dtype=np.float32)
    for i, text in enumerate(texts):
        labels, probs = model.predict(" ".join(text.strip().splitlines()), k=-1)
        scores[i] = dict(zip(labels, probs, strict=True)).get(f"__label__{label}", 0.0)
    return scores, time.perf_counter() - wall, time.process_time() - cpu


def stage(model_path: Path, texts: list[str], label: str) -> tuple[np.ndarray, float, float]:
    from curate.stages.classifier import Classifier, ClassifierParams

    spec = {"model": str(model_path), "name": "q", "label": label}
    st = Classifier(ClassifierParams(models=[spec]))
    st.setup()
    batches = [pa.RecordBatch.from_pydict({"id": [str(j) for j in range(i, i + len(chunk))],
                                           "text": chunk})
               for i in range(0, len(texts), 1000) for chunk in [texts[i : i + 1000]]]  # fmt: skip
    wall, cpu = time.perf_counter(), time.process_time()
    out = [st.process(b).batch.column("q_score").to_numpy() for b in batches]
    return np.concatenate(out), time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    docs = documents(args.mb)
    texts = [t for _, t in docs]
    size = sum(len(t.encode()) for t in texts) / MB
    with tempfile.TemporaryDirectory() as tmp:
        model = train(documents(args.mb + 10)[-len(docs) // 2 :], Path(tmp))
        best: dict[str, tuple[float, float]] = {}
        for _ in range(args.rounds):
            for name, fn in (("fasttext-predict", peer), ("curate classifier", stage)):
                scores, wall, cpu = fn(model, texts, "man")
                best[name] = min(best.get(name, (wall, cpu)), (wall, cpu))
                if name == "fasttext-predict":
                    reference = scores
                else:
                    assert np.array_equal(scores, reference), "scores differ"
    print(f"{len(texts):,} documents, {size:.1f} MB (text), identical scores")
    for name, (wall, cpu) in best.items():
        print(f"{name:18} {size / wall:6.2f} MB/s  wall {wall:6.2f}s  CPU {cpu:6.2f}s")
    sys.stdout.flush()


if __name__ == "__main__":
    main()

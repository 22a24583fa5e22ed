"""Debian's `fasttext` command-line tool (apt-get install fasttext): it trains the test
models and is the reference their predictions are checked against."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def dclm_one_line(content: str) -> str:
    """DCLM's preprocessing, as DCLM writes it (classify_fasttext_hq_prob in
    baselines/mappers/enrichers/quality_prediction_enrichers_calc_fasttext.py):
    "Clean the input text by joining all lines into a single string"."""
    text = " ".join(content.strip().splitlines())
    return text


def cli() -> str:
    found = shutil.which("fasttext")
    assert found, "Debian's fasttext command is missing: apt-get install fasttext (see README)"
    return found


def train(docs: list[tuple[str, str]], out: Path, **args: object) -> Path:
    """A supervised model trained on (label, text) pairs, deterministically (one thread)."""
    train_file = out.with_suffix(".train.txt")
    with open(train_file, "w", encoding="utf-8") as f:
        for label, text in docs:
            f.write(f"__label__{label} {dclm_one_line(text)}\n")
    options = {"epoch": 20, "lr": 0.5, "dim": 16, "wordNgrams": 2, "bucket": 50000, "minCount": 1,
               "thread": 1, "seed": 1, "verbose": 0, **args}  # fmt: skip
    flags = [x for k, v in options.items() for x in (f"-{k}", str(v))]
    subprocess.run([cli(), "supervised", "-input", str(train_file), "-output", str(out), *flags],
                   check=True, capture_output=True)  # fmt: skip
    return out.with_suffix(".bin")


def predict_prob(model: Path, texts: list[str], folder: Path) -> list[list[tuple[str, str]]]:
    """Every label with its probability as fastText prints it (6 significant digits), in
    fastText's order, for each text after DCLM's preprocessing."""
    lines = folder / "predict.txt"
    with open(lines, "w", encoding="utf-8") as f:
        for text in texts:
            f.write(dclm_one_line(text) + "\n")
    done = subprocess.run([cli(), "predict-prob", str(model), str(lines), "-1"],
                          check=True, capture_output=True)  # fmt: skip
    out = []
    for line in done.stdout.decode("utf-8").split("\n")[: len(texts)]:
        parts = line.split()
        out.append([(parts[i].removeprefix("__label__"), parts[i + 1])
                    for i in range(0, len(parts), 2)])  # fmt: skip
    assert len(out) == len(texts)
    return out

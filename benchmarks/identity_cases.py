"""What the byte-identity check builds: every runnable recipe of recipes/ and the corpus recipe,
each under every engine setting.

Recipes are taken from the base commit's recipes/ (both sides build the very same recipe
text) and changed only where a comparison needs it: the engine setting, `fsync: false`
(it changes no byte, only time) and the output root (a folder beside the recipe). The
template recipe names files of a user's machine (/data/..., /models/...): its inputs
and model files are pointed at sample_data/ (TEMPLATES). A recipe that still names a
file that is not there is skipped, and the report says which files.

The corpus recipe runs the generated corpus (benchmarks/identity_corpus.py, 22 MB) with
partitions of 1 MB, shards of 256 KB, held-out validation and test splits, both dedups
(two barriers, so the collectives run across partitions and workers), rejected output,
quarantine, and tokenize with packing.
"""

from __future__ import annotations

import glob
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class Engine:
    """One engine setting every case is built with."""

    name: str
    kind: str
    workers: int


ENGINES = (Engine("local-1", "local", 1), Engine("local-2", "local", 2), Engine("ray-2", "ray", 2))


@dataclass
class Case:
    """One recipe, ready to be written into a scratch folder as recipes/<name>.yaml."""

    name: str
    recipe: dict[str, Any]
    note: str = ""
    links: dict[str, str] = field(default_factory=dict)  # scratch name -> inputs folder name

    def text(self, engine: Engine) -> str:
        recipe = dict(self.recipe)
        recipe["engine"] = {"kind": engine.kind, "workers": engine.workers}
        return yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True)


def _template_on_sample_data(recipe: dict[str, Any]) -> str:
    """pretrain-local-model.yaml with its /data and /models paths pointed at sample_data/."""
    recipe["inputs"] = [
        "../sample_data/web/*.jsonl",  # for /data/raw/web/*.jsonl.zst
        "../sample_data/archive.jsonl.gz",  # for /data/raw/books/*.parquet
        "../sample_data/notes",  # for the folder /data/raw/code
    ]
    for stage in recipe["stages"]:
        (name, params), *_ = stage.items()
        if name == "decontaminate":
            params["benchmarks"] = [
                {
                    "name": "quiz",
                    "path": "../sample_data/benchmarks/quiz.jsonl",
                    "fields": ["question", "choices"],
                }
            ]
        if name == "tokenize":
            params["source"] = "../sample_data/tokenizer"
    return "inputs, decontaminate's benchmarks and tokenize's model pointed at sample_data/"


TEMPLATES: dict[str, Callable[[dict[str, Any]], str]] = {
    "pretrain-local-model": _template_on_sample_data
}


def corpus_recipe() -> dict[str, Any]:
    return {
        "name": "corpus",
        "inputs": ["../corpus/*.jsonl"],
        "text_field": "text",
        "id_field": "id",
        "fields": {"source": "string"},
        "on_error": "quarantine",
        "partition_size": "1MB",
        "split": {"validation": 0.05, "test": 0.02, "seed": 7},
        "stages": [
            {"normalize": {"form": "NFC", "max_newlines": 2}},
            {"filter_length": {"min_words": 5}},
            {"exact_dedup": {}},
            {"minhash_dedup": {"threshold": 0.8}},
            {
                "tokenize": {
                    "source": "../sample_data/tokenizer",
                    "eos": True,
                    "pack": {"seq_len": 512},
                }
            },
        ],
        "output": {"root": "../curated", "shard_size": "256KB", "rejected": True, "fsync": False},
    }


def _missing_files(recipe: dict[str, Any], folder: Path) -> list[str]:
    """Inputs and stage files (source, path, ignore) the recipe names that are not there."""
    names: list[str] = list(recipe.get("inputs", []))

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key in ("source", "path") and isinstance(item, str):
                    names.append(item)
                elif key == "ignore" and isinstance(item, list):
                    names.extend(str(i) for i in item)
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(recipe.get("stages", []))
    return [name for name in names if not glob.glob(str(folder / name))]


def recipe_cases(recipes: Path) -> tuple[list[Case], list[str]]:
    """The cases of recipes/ (a copy of the base commit's, beside sample_data/), and the
    skipped recipes with the reason."""
    cases, skipped = [], []
    for path in sorted(recipes.glob("*.yaml")):
        recipe = yaml.safe_load(path.read_text())
        note = ""
        if path.stem in TEMPLATES:
            note = TEMPLATES[path.stem](recipe)
        missing = _missing_files(recipe, recipes)
        if missing:
            skipped.append(f"{path.name}: names files not on this machine: {', '.join(missing)}")
            continue
        recipe.setdefault("output", {})
        recipe["output"]["root"] = "../curated"
        recipe["output"]["fsync"] = False
        cases.append(Case(path.stem, recipe, note, links={"sample_data": "sample_data"}))
    return cases, skipped


def all_cases(inputs: Path) -> tuple[list[Case], list[str]]:
    cases, skipped = recipe_cases(inputs / "recipes")
    corpus = Case(
        "corpus",
        corpus_recipe(),
        "22 MB generated, partitions 1 MB, shards 256 KB, split, dedups, tokenize + pack",
        links={"sample_data": "sample_data", "corpus": "corpus"},
    )
    return [*cases, corpus], skipped

"""Small tokenized sources for mixtures, built by real recipe runs with the sample tokenizer,
and mixture files naming them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from conftest import REPO, corpus, write_jsonl

TOKENIZER = REPO / "sample_data" / "tokenizer"


def source_recipe(
    folder: Path, name: str, docs: int, *, seq_len: int | None = 16, **tokenize: Any
) -> Path:
    """`folder/<name>.yaml`, reading `docs` documents of its own, output in `folder/out`."""
    write_jsonl(folder / "data" / name / "a.jsonl", corpus(docs, dup_every=0, prefix=name))
    params: dict[str, Any] = {"source": str(TOKENIZER), **tokenize}
    if seq_len is not None:
        params["pack"] = {"seq_len": seq_len}
    recipe = {
        "name": name,
        "inputs": [f"data/{name}/*.jsonl"],
        "id_field": "id",
        "stages": [{"tokenize": params}],
        "output": {"root": "out", "fsync": False},
        "engine": {"workers": 1},
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


def mixture_file(folder: Path, sources: list[dict[str, Any]], **fields: Any) -> Path:
    name = fields.pop("file", "mixture.yaml")
    data: dict[str, Any] = {"name": "mix", "budget": 16_000, "seed": 3, "sources": sources}
    data["output"] = {"root": "out", "fsync": False}
    data.update(fields)
    path = folder / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path

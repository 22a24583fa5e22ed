"""The two small files that make a version folder a `datasets.load_from_disk` folder.

`load_from_disk` needs `state.json` with all seven keys and a `dataset_info.json`
whose features, when given, match the shards exactly; both point at the shards,
which it memory-maps without copying.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa


def state_json(shards: list[str], fingerprint: str) -> str:
    state: dict[str, object] = {
        "_data_files": [{"filename": name} for name in shards],
        "_fingerprint": fingerprint[:16],
        "_format_columns": None,
        "_format_kwargs": {},
        "_format_type": None,
        "_output_all_columns": False,
        "_split": None,
    }
    return json.dumps(state, indent=2)


def dataset_info_json(schema: pa.Schema, description: str) -> str:
    from datasets import Features  # heavy import, only when publishing

    info = {
        "description": description,
        "citation": "",
        "homepage": "",
        "license": "",
        "features": Features.from_arrow_schema(schema).to_dict(),
    }
    return json.dumps(info, indent=2)


def write_hf_files(folder: Path, shards: list[str], schema: pa.Schema, fingerprint: str) -> None:
    (folder / "state.json").write_text(state_json(shards, fingerprint))
    description = f"curate dataset, fingerprint {fingerprint}; see manifest.json"
    (folder / "dataset_info.json").write_text(dataset_info_json(schema, description))

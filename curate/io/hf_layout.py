"""The two small files that make a version folder a `datasets.load_from_disk` folder.

`load_from_disk` needs `state.json` with all seven keys and a `dataset_info.json`
whose features, when given, match the shards exactly; both point at the shards,
which it memory-maps without copying.
"""

from __future__ import annotations

import json
from pathlib import Path


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


def dataset_info_json(description: str) -> str:
    """Without `features`: `datasets` then takes them from the shards' own Arrow schema, which
    cannot disagree with the shards (a stated feature that differs, uint16 for uint32, fails
    the load), and publishing need not import `datasets` (half a second)."""
    info = {"description": description, "citation": "", "homepage": "", "license": ""}
    return json.dumps(info, indent=2)


def write_hf_files(folder: Path, shards: list[str], fingerprint: str) -> None:
    (folder / "state.json").write_text(state_json(shards, fingerprint))
    description = f"curate dataset, fingerprint {fingerprint}; see manifest.json"
    (folder / "dataset_info.json").write_text(dataset_info_json(description))

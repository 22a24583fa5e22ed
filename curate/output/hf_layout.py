"""The small files that make a version folder a `datasets.load_from_disk` folder.

`load_from_disk` needs `state.json` with all seven keys and a `dataset_info.json`
whose features, when given, match the shards exactly; both point at the shards,
which it memory-maps without copying.

A version with splits is laid out as `datasets` saves a `DatasetDict`: a
`dataset_dict.json` naming the splits, and one folder per split holding its own
`state.json`, `dataset_info.json` and shards (`train/shards/part-*.arrow`), so
`load_from_disk(version)` returns the `DatasetDict` and `load_from_disk(version/train)`
one `Dataset`. Such a version has no `state.json` at its top: that is how `datasets`
tells the two apart.
"""

from __future__ import annotations

import json
from pathlib import Path


def state_json(shards: list[str], fingerprint: str, split: str | None = None) -> str:
    state: dict[str, object] = {
        "_data_files": [{"filename": name} for name in shards],
        "_fingerprint": fingerprint[:16],
        "_format_columns": None,
        "_format_kwargs": {},
        "_format_type": None,
        "_output_all_columns": False,
        "_split": split,
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


def write_hf_dict(folder: Path, splits: dict[str, list[str]], fingerprint: str) -> None:
    """`dataset_dict.json` and each split's two files; shard paths are relative to the split's
    folder."""
    (folder / "dataset_dict.json").write_text(json.dumps({"splits": list(splits)}))
    for name, shards in splits.items():
        (folder / name).mkdir(exist_ok=True)
        (folder / name / "state.json").write_text(state_json(shards, fingerprint, name))
        description = (
            f"curate dataset, {name} split, fingerprint {fingerprint}; see ../manifest.json"
        )
        (folder / name / "dataset_info.json").write_text(dataset_info_json(description))


def hf_files(splits: list[str]) -> set[str]:
    """The layout files a version holds besides its shards and side outputs."""
    if not splits:
        return {"state.json", "dataset_info.json"}
    return {"dataset_dict.json"} | {
        f"{n}/{f}" for n in splits for f in ("state.json", "dataset_info.json")
    }

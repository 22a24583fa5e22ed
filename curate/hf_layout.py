"""The small files that make a version folder a `datasets` folder, for both of its loaders.

Every version is laid out as `datasets` saves a `DatasetDict`: a `dataset_dict.json` naming
the splits on top, and one folder per split holding its `state.json` (the shards to read, in
order) and `dataset_info.json`. That is the only layout both loaders accept on one folder
(datasets 5.2.0): `load_from_disk` opens it, and `load_dataset` reads the dataset card's
`configs` (`curate.output.card`), which it refuses to do for a folder holding a `state.json`
on top (`load.py`, the `DATASET_STATE_JSON_FILENAME` check). Both give the same rows.

- A version with splits holds each split's shards in its folder (`train/shards/part-*`).
- A version without splits is one split, `train`: `train/state.json` lists the shards where
  every version keeps them, `../shards/part-*` (datasets joins the name to the split's
  folder, so the OS resolves the `..`). The shards do not move: their paths in the manifest,
  the stage cache, staging records, lineage, mixtures and the hard links shared with earlier
  versions stay what they were; only these three small files differ.
  `Version.to_dataset()` reads `train/` and so still gives one `Dataset`.

Versions made before this layout (the manifest has no `layout`) hold a version without
splits as `load_from_disk` saves a `Dataset`: `state.json` and `dataset_info.json` on top.
They are read, verified, rewritten and served as they are (`LEGACY`); nothing rebuilds them.
The manifest's `layout` says which, so readers never guess from the files present.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

DICT = "dataset_dict"  # the manifest's `layout` of versions written now
LEGACY = None  # absent: a version without splits has state.json on top
TRAIN = "train"
_SPLIT_FILES = ("state.json", "dataset_info.json")


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


def split_folders(splits: Sequence[str], layout: object) -> list[str]:
    """The version's split folders: its splits; `train` for a version without splits in the
    dict layout; none for a legacy version without splits (state.json on top)."""
    if splits:
        return list(splits)
    return [TRAIN] if layout == DICT else []


def manifest_folders(manifest: Mapping[str, Any]) -> list[str]:
    """`split_folders` of a manifest read as JSON (a mixture has no datasets layout)."""
    if manifest.get("mixture") is not None:
        return []
    record = manifest.get("splits")
    names = record.get("splits") if isinstance(record, dict) else None
    return split_folders(list(names) if isinstance(names, dict) else [], manifest.get("layout"))


def data_files(
    shards: Iterable[tuple[str, str | None]], splits: Sequence[str], layout: object
) -> dict[str, list[str]]:
    """Each state.json of the version -> the names it lists (relative to its folder), in the
    manifest's order, from the shards' (path, split)."""
    shards = list(shards)
    folders = split_folders(splits, layout)
    if not folders:
        return {"state.json": [path for path, _ in shards]}
    return {
        f"{name}/state.json": [
            _from(path, name) for path, split in shards if split == name or not splits
        ]
        for name in folders
    }


def _from(path: str, folder: str) -> str:
    """`path` (relative to the version) as its split folder's state.json names it."""
    prefix = folder + "/"
    return path.removeprefix(prefix) if path.startswith(prefix) else "../" + path


def resolved(state: str, name: str) -> str:
    """A name a state.json at `state` lists, as a path relative to the version (`..` gone):
    what to check stays inside the version, and what the manifest lists."""
    return posixpath.normpath(posixpath.join(posixpath.dirname(state), name))


def write_layout(
    folder: Path,
    shards: Iterable[tuple[str, str | None]],
    splits: Sequence[str],
    layout: object,
    fingerprint: str,
) -> None:
    """Write the layout files of a version (its `hf_files`) into `folder`."""
    folders = split_folders(splits, layout)
    if folders:
        (folder / "dataset_dict.json").write_text(json.dumps({"splits": folders}))
    for state, names in data_files(shards, splits, layout).items():
        split = posixpath.dirname(state) or None
        where = folder / split if split else folder
        where.mkdir(exist_ok=True)
        (where / "state.json").write_text(state_json(names, fingerprint, split))
        about = f"{split} split, " if split else ""
        up = "../" if split else ""
        description = f"curate dataset, {about}fingerprint {fingerprint}; see {up}manifest.json"
        (where / "dataset_info.json").write_text(dataset_info_json(description))


def hf_files(splits: Sequence[str], layout: object) -> set[str]:
    """The layout files a version holds besides its shards and side outputs."""
    folders = split_folders(splits, layout)
    if not folders:
        return set(_SPLIT_FILES)
    return {"dataset_dict.json"} | {f"{n}/{f}" for n in folders for f in _SPLIT_FILES}


def unsplit_state(folder: str | Path) -> str | None:
    """`train/state.json` when `folder` is a curate version without splits in the dict
    layout (its manifest says so), else None: naming such a version as an input reads its
    shards, as naming a legacy one (state.json on top) always has."""
    try:
        with open(Path(folder, "manifest.json"), "rb") as f:
            manifest = json.loads(f.read())
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("splits"):
        return None
    return f"{TRAIN}/state.json" if manifest_folders(manifest) == [TRAIN] else None

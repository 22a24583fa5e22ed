"""The folder of symlinks `Version.to_dataset()` hands to `datasets`, under curate's cache.

`datasets` writes `.map()` caches beside the files it loaded; a view keeps them out of
the read-only version. A view is named by a hash of the version's real path and its
fingerprint, never by names read from the manifest: two output roots built from the
same recipe each get their own view, and a manifest's `dataset` or `version` cannot
move a view out of the cache (they appear only as a sanitized label). Every path the
view links to is checked to stay inside the version (`curate.paths.inside`), and so
are the files each `state.json` tells `datasets` to read (a version without splits lists
`../shards/...` from its `train/`: checked as the path it resolves to in the version).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from curate.errors import CurateError
from curate.hf_layout import data_files, hf_files, resolved, split_folders
from curate.modes import make_dirs
from curate.paths import inside

if TYPE_CHECKING:
    from curate.version import Version


def view_folder(version: Version, cache: Path) -> Path:
    """The version's view under `cache`/views, made (atomically, by rename) if missing."""
    views = cache / "views"
    key = hashlib.sha256(f"{version.path}\0{version.fingerprint}".encode()).hexdigest()[:20]
    label = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{version.dataset}-{version.name}")[:60].lstrip(".")
    view = views / f"{label}-{key}"
    links = _links(version)  # checked every time: the version's files are what is served
    layout = version.manifest.get("layout")
    marker = view / ("dataset_dict.json" if split_folders(version.splits, layout) else "state.json")
    if version.manifest.get("mixture") is not None:  # its shards only (curate.mixture_dataset)
        marker = view / next(iter(links))
    if not marker.exists():
        tmp = views / f".{view.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        for rel, target in links.items():
            link = tmp / rel  # rel was checked: relative, no '..'
            make_dirs(link.parent, 0o700)  # the user's own cache, whatever the umask
            link.symlink_to(target)
        try:
            os.rename(tmp, view)
        except OSError:  # another process made the same view first
            shutil.rmtree(tmp, ignore_errors=True)
    return view


def _links(version: Version) -> dict[str, Path]:
    """Relative path in the view -> the version's file, each checked to stay inside."""
    manifest = version.path / "manifest.json"
    links: dict[str, Path] = {}
    for i, shard in enumerate(version.manifest["shards"]):
        rel = shard.get("path") if isinstance(shard, dict) else None
        links[str(rel)] = inside(version.path, rel, source=manifest, field=f"shards[{i}].path")
    if version.manifest.get("mixture") is not None:
        return links  # no datasets layout: its index says which rows are its samples
    layout = version.manifest.get("layout")
    for name in sorted(hf_files(version.splits, layout)):
        links[name] = inside(version.path, name, source=manifest, field="splits")
    folders = split_folders(version.splits, layout)
    if folders:
        _check_dict(version.path, folders)
    shards = [s for s in version.manifest["shards"] if isinstance(s, dict)]
    pairs = [(str(s.get("path")), s.get("split")) for s in shards]
    for state, want in data_files(pairs, version.splits, layout).items():
        _check_state(version.path, state, want)
    return links


def _check_dict(folder: Path, splits: list[str]) -> None:
    """The splits a dataset_dict.json makes `datasets` load (folders beside it) stay inside
    the version: each is one of the manifest's splits."""
    path = folder / "dataset_dict.json"
    try:
        names = json.loads(path.read_text())["splits"]
        if not isinstance(names, list):
            raise TypeError
    except (OSError, ValueError, KeyError, TypeError):
        raise CurateError(
            f"{path} is not a datasets dataset_dict.json (no 'splits' list); "
            "`curate verify` checks the version"
        ) from None
    for i, name in enumerate(names):
        inside(folder, name, source=path, field=f"splits[{i}]")
        if name not in splits:
            raise CurateError(
                f"{path}: splits[{i}] {name!r} is not one of the manifest's splits "
                f"({', '.join(splits)}); `curate verify` checks the version"
            )


def _check_state(folder: Path, state: str, want: list[str]) -> None:
    """The files a state.json makes `datasets` read stay inside the version and are the
    manifest's shards, in order: a shard listed twice would be served twice."""
    path = folder / state
    try:
        files = [entry["filename"] for entry in json.loads(path.read_text())["_data_files"]]
    except (OSError, ValueError, KeyError, TypeError):
        raise CurateError(
            f"{path} is not a datasets state.json (no '_data_files' list); "
            "`curate verify` checks the version"
        ) from None
    for i, name in enumerate(files):
        where = resolved(state, name) if isinstance(name, str) else name
        inside(folder, where, source=path, field=f"_data_files[{i}].filename")
    if files != want:
        raise CurateError(
            f"{path}: lists other files than the manifest's shards; "
            "`curate verify` checks the version"
        )

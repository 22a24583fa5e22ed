"""The cheap check of a published version: every file its manifest lists is there, as listed.

One `lstat` per file and no reading, so a version of thousands of shards is checked in
milliseconds and `prepare()`, `open()`, `open_tokens()` and `to_arrow()`/`to_dataset()`
can afford it every time: a missing shard, one replaced by a shorter (valid) file, a
symlink, or a path that leaves the version folder fails there, by name, instead of
serving part of the data or a raw pyarrow error. Bytes changed in place (same size) are
not seen here: `curate verify`, and `prepare(verify="full")`, hash every file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from curate.errors import CurateError
from curate.hf_layout import hf_files
from curate.paths import escape

SIDE_OUTPUTS = ("shards", "rejected", "quarantine")
OUTSIDE = "outside the version folder"


class DamagedVersion(CurateError):
    """A published version's files are not what its manifest lists."""


def listed_files(manifest: Mapping[str, Any]) -> Iterator[tuple[str, Any, int | None]]:
    """(where the manifest lists it, path relative to the version, size in bytes) of every
    file the manifest lists: the shards, rejected and quarantine files, lineage, the statistics and
    the `datasets` layout files (whose size the manifest does not record: None; a size of
    -1 means the manifest gives none where it must)."""
    for key in SIDE_OUTPUTS:
        records = manifest.get(key)
        if not isinstance(records, list):
            yield key, None, -1
            continue
        for i, record in enumerate(records):
            path = record.get("path") if isinstance(record, dict) else None
            size = record.get("bytes") if isinstance(record, dict) else None
            yield f"{key}[{i}].path", path, size if isinstance(size, int) else -1
    lineage = manifest.get("lineage")  # absent: a version made before lineage
    for i, record in enumerate(lineage if isinstance(lineage, list) else []):
        path = record.get("path") if isinstance(record, dict) else None
        size = record.get("bytes") if isinstance(record, dict) else None
        yield f"lineage[{i}].path", path, size if isinstance(size, int) else -1
    statistics = manifest.get("statistics")  # absent: built without statistics
    if statistics is not None:
        path = statistics.get("path") if isinstance(statistics, dict) else None
        size = statistics.get("bytes") if isinstance(statistics, dict) else None
        yield "statistics.path", path, size if isinstance(size, int) else -1
    mixture = manifest.get("mixture")  # a mixture (curate.mix): its index, no datasets layout
    if mixture is not None:
        index = mixture.get("index") if isinstance(mixture, dict) else None
        path = index.get("path") if isinstance(index, dict) else None
        size = index.get("bytes") if isinstance(index, dict) else None
        yield "mixture.index.path", path, size if isinstance(size, int) else -1
    splits = manifest.get("splits")
    named = splits.get("splits") if isinstance(splits, dict) else None
    names = list(named) if isinstance(named, dict) else []
    layout = hf_files(names, manifest.get("layout")) if mixture is None else []
    for name in sorted(layout):
        yield "splits", name, None
    card = manifest.get("card")  # absent: a version made before cards
    if card is not None:
        path = card.get("path") if isinstance(card, dict) else None
        size = card.get("bytes") if isinstance(card, dict) else None
        yield "card.path", path, size if isinstance(size, int) else -1


def problems(folder: Path, manifest: Mapping[str, Any]) -> list[str]:
    """What is wrong with the files of a version folder, one line per file (empty: intact)."""
    found: list[str] = []
    folders: dict[str, str | None] = {}  # a parent folder's problem, checked once
    base = os.fspath(folder)
    for field, path, size in listed_files(manifest):
        if size == -1:
            found.append(f"manifest.json: {field} is not a file with a path and a size")
            continue
        problem = file_problem(base, path, size, folders)
        if problem == OUTSIDE:  # a crafted manifest: said as every path read from a file is
            why = escape(folder, path) or "not a plain relative path"
            found.append(f"{base}/manifest.json: {field} {path!r} leads outside {base} ({why})")
        elif problem is not None:
            found.append(f"{path}: {problem}")
    return found


def file_problem(
    folder: str | Path, path: Any, size: int | None, folders: dict[str, str | None] | None = None
) -> str | None:
    """Why `path` (as a manifest lists it) is not the version's own file of `size` bytes.

    Plain strings rather than `pathlib`: this runs once per shard on every `prepare()`,
    where building path objects would cost more than the stat itself.
    """
    if not isinstance(path, str) or not path:
        return "not a file path"
    parts = path.split("/")
    if path.startswith("/") or ".." in parts or "\\" in path or "\0" in path:
        return OUTSIDE
    base = os.fspath(folder)
    folders = {} if folders is None else folders
    for i in range(1, len(parts)):  # its folders inside the version: shards/, train/shards/
        key = "/".join(parts[:i])
        if key not in folders:
            folders[key] = _folder_problem(f"{base}/{key}")
        if folders[key] is not None:
            return f"{folders[key]} ({key}/)"
    try:
        st = os.lstat(f"{base}/{path}")
    except (FileNotFoundError, NotADirectoryError):
        return "missing"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "a symlink (a version holds its own files, never links to others)"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if size is not None and st.st_size != size:
        return f"size {st.st_size}, manifest says {size}"
    return None


def _folder_problem(path: str) -> str | None:
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None  # each file in it is then reported missing
    except OSError as exc:
        return f"folder cannot be read ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "inside a symlinked folder"
    return None


def describe(found: list[str]) -> str:
    """The first problem, and how many more: one line for a log or an error."""
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return f"{found[0]}{more}"


def damaged(folder: Path, found: list[str]) -> DamagedVersion:
    """The error for a version with these problems: the first file by name, and what to do."""
    return DamagedVersion(
        f"{folder} is damaged: {describe(found)}; `curate verify {folder}` checks every "
        "file, and `curate run` on its recipe builds it again as a new version"
    )

"""Which folder a `LATEST` or `.index` entry may lead to: a sealed version of that dataset.

Both files are one line of text in a folder other users of a shared root may write. A
name in them is followed only to a *sealed* version: a real folder (not a link) named
`v<digits>` directly inside the dataset folder, whose manifest.json is read-only (as
`Store.publish` seals it before the rename that makes it visible; the folder itself is
made read-only just after, so a crash in between leaves a findable version) and names
this dataset and this version (and, for an `.index` entry, the fingerprint the entry
is filed under). Anything else (`../../evil/v9`, an absolute
path, a folder planted without a manifest, a writable copy) is refused by name.

`curate.open()` fails on a LATEST that names anything else rather than falling back to
an older version: a trainer must not silently train on other data than the newest
version, and an "older valid version" may itself have been planted. Naming a version
explicitly (`curate.open(folder, "v3")`) still works after checking it.

This module also holds what every reader of a dataset folder shares: the one pattern of a
version's name (`VERSION_NAME`, used by store, roots and gc) and the rule that a version's
manifest names its own folder (`naming_problem`, which gc's `curate.owned` applies too).
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from curate.errors import CurateError
from curate.paths import inside

# the only names curate gives versions (ASCII digits); store, gc and roots use this one too
VERSION_NAME = re.compile(r"^v[0-9]+$")


_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
# non-blocking: a named pipe planted as manifest.json would wait for a writer forever
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
MANIFEST_LIMIT = 1 << 30  # a 1,000,000-shard manifest is about 300 MB
NO_MANIFEST = "no readable manifest.json"


def read_manifest(dataset: int | Path, name: str) -> tuple[Any, int, str | None]:
    """(parsed manifest.json, its permission bits, None) of the folder `name` in a dataset
    folder (a path, or a descriptor already open on it), or (None, 0, why not).

    The one reader of a version's own manifest, for what LATEST and `.index` may lead to
    (`sealed_manifest`) and what gc may delete (`curate.owned`): the folder and the file are
    opened relative to the dataset folder with O_NOFOLLOW, so a link is refused in the same
    call that opens it, never checked first and followed after; a named pipe, a device or a
    file larger than any manifest curate writes is refused without reading it."""
    if isinstance(dataset, int):
        return _read_manifest(dataset, name)
    try:
        dataset_fd = os.open(dataset, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        return None, 0, f"its dataset folder cannot be opened ({exc.strerror})"
    try:
        return _read_manifest(dataset_fd, name)
    finally:
        os.close(dataset_fd)


def _read_manifest(dataset_fd: int, name: str) -> tuple[Any, int, str | None]:
    try:
        fd = os.open(name, _DIR, dir_fd=dataset_fd)
    except FileNotFoundError:
        return None, 0, "no such folder"
    except OSError as exc:
        return None, 0, _unopened(dataset_fd, name, exc)
    try:
        try:
            mfd = os.open("manifest.json", _FILE, dir_fd=fd)
        except FileNotFoundError:
            return None, 0, NO_MANIFEST
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return None, 0, "its manifest.json is not a regular file"
            return None, 0, f"{NO_MANIFEST} ({exc.strerror})"
        with open(mfd, "rb") as f:
            st = os.fstat(mfd)
            if not stat.S_ISREG(st.st_mode):
                return None, 0, "its manifest.json is not a regular file"
            if st.st_size > MANIFEST_LIMIT:
                return None, 0, f"its manifest.json is larger than {MANIFEST_LIMIT >> 20} MiB"
            try:
                raw = f.read(MANIFEST_LIMIT + 1)
            except OSError as exc:
                return None, 0, f"{NO_MANIFEST} ({exc.strerror})"
    finally:
        os.close(fd)
    try:
        return json.loads(raw), stat.S_IMODE(st.st_mode), None
    except (ValueError, RecursionError):
        return None, 0, "its manifest.json is not JSON"


def _unopened(dataset_fd: int, name: str, exc: OSError) -> str:
    """Why the folder `name` could not be opened: a link (refused by O_NOFOLLOW), not a folder."""
    try:
        mode = os.stat(name, dir_fd=dataset_fd, follow_symlinks=False).st_mode
    except OSError:
        mode = 0
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if mode and not stat.S_ISDIR(mode):
        return "not a folder"
    return f"cannot be opened ({exc.strerror})"


def seal_problem(dataset: Path, name: str, fingerprint: str | None = None) -> str | None:
    """Why `dataset/name` is not a sealed version of `dataset`, or None when it is one."""
    return sealed_manifest(dataset, name, fingerprint)[1]


def sealed_manifest(
    dataset: Path, name: str, fingerprint: str | None = None, *, dataset_fd: int | None = None
) -> tuple[dict[str, Any] | None, str | None]:
    """`seal_problem` with the manifest it read: (manifest, None) for a sealed version, else
    (None, why). A caller that goes on to use the version reads the same bytes it checked.
    `dataset_fd`: a descriptor already open on the dataset folder (the store holds one)."""
    dataset = Path(os.path.abspath(dataset))  # '.', './' or 'v1/..' name the folder too
    if not VERSION_NAME.match(name):
        return None, "not a version name (v1, v2, ...)"
    data, mode, problem = read_manifest(dataset if dataset_fd is None else dataset_fd, name)
    if problem is not None:
        return None, problem
    if mode & 0o222:
        return None, "its manifest.json is writable (curate publishes versions read-only)"
    problem = naming_problem(data, dataset, name)
    if problem is None and fingerprint is not None and data.get("fingerprint") != fingerprint:
        problem = "its manifest has another fingerprint"
    return (data, None) if problem is None else (None, problem)


def naming_problem(manifest: Any, dataset: Path, name: str) -> str | None:
    """Why a manifest read from the folder `dataset/name` does not name that folder (its
    `dataset` the dataset folder's name, its `version` the folder's name), or None when it does.

    The one rule for a version's own manifest: a `cp -r v2 v8`, another dataset's version or
    a trainer's `checkpoints/v1` is no version of this dataset. `seal_problem` (what LATEST,
    `.index` and a rebuild may follow) also wants the manifest read-only; `curate.owned` (what
    gc may delete) also wants a fingerprint, and takes an unreadable manifest as not ours.
    """
    if not isinstance(manifest, dict):
        return "its manifest.json is not a curate manifest"
    said = (manifest.get("dataset"), manifest.get("version"))
    if said != (dataset.name, name):
        return (
            f"its manifest names {str(said[0])!r} {str(said[1])!r}, not {dataset.name!r} {name!r}"
        )
    return None


def latest_version(dataset: Path) -> Path:
    """The version a dataset folder's LATEST names, when it is a sealed one of this dataset."""
    return latest_sealed(dataset)[0]


def latest_sealed(dataset: Path) -> tuple[Path, dict[str, Any]]:
    """`latest_version` with the manifest the sealed check read (opening reads it once)."""
    latest = dataset / "LATEST"
    try:
        name = latest.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise CurateError(f"{dataset} has no published version (no LATEST file)") from None
    except (OSError, ValueError) as exc:
        raise CurateError(f"{latest} cannot be read: {exc}") from None
    manifest, problem = sealed_manifest(dataset, name)
    if manifest is None:
        raise CurateError(
            f"{latest} names {name[:80]!r}, which is not a published version of this dataset "
            f"({problem}); not following it: check the dataset folder, or name a version"
        )
    return dataset / name, manifest


def version_path(path: Path, version: str = "LATEST") -> Path:
    """What `curate.open(path, version)` opens: a version folder as given, a dataset folder's
    LATEST (sealed, see above), or a named version inside the dataset folder."""
    return located(path, version)[0]


def located(path: Path, version: str = "LATEST") -> tuple[Path, dict[str, Any] | None]:
    """`version_path`, with the manifest when finding the version meant reading it (LATEST's
    sealed check): `curate.open` hands it to the Version instead of reading it again."""
    if (path / "manifest.json").is_file():
        return path, None
    if not path.exists():
        raise CurateError(f"{path} does not exist")
    if not path.is_dir() or (
        version == "LATEST"
        and not (path / "LATEST").exists()
        and not any(VERSION_NAME.match(p.name) for p in path.iterdir())
    ):
        raise CurateError(
            f"{path} is not a version (no manifest.json) nor a curate dataset folder "
            "(no LATEST, no v1, v2, ...)"
        )
    if version == "LATEST":
        return latest_sealed(path)
    return inside(path, version, source="curate.open", field="version"), None

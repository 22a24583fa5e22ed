"""What curate made under a folder, told apart from everything else that may live there.

`curate gc` deletes and `curate log` lists only what this module says curate made:
- a dataset folder: a real folder (never a symbolic link) holding curate's bookkeeping
  (`LATEST`, `.index`, `.staging-*`, `.deleting-*`) or a version of its own;
- a version: a real folder named `v<digits>` whose own `manifest.json` names it (its
  `dataset` is the dataset folder's name, its `version` the folder's name). A trainer's
  `checkpoints/v1`, a `cp -r v2 v8`, another dataset's version or an unreadable manifest
  are not ours: they are reported and left alone;
- leftovers: a run's `.staging-*` (live while the run holds its build lock) and a removal
  gc did not finish (`.deleting-*`).
Nothing here follows a symbolic link, waits on a named pipe, writes or creates a file.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from curate.dirfd import Folder
from curate.errors import CurateError
from curate.sealed import VERSION_NAME, naming_problem, read_manifest

LINK = "a symbolic link (gc never follows one)"
# only the names curate gives them: anything else under those prefixes is not ours
LEFTOVER_NAME = re.compile(r"^(\.staging-[0-9a-f]{20}|\.deleting-v\d+-\d+)$")


@dataclass(frozen=True)
class Entry:
    """One folder in a dataset folder: a version of ours, or one we must leave alone (`why`)."""

    name: str
    fingerprint: str | None = None
    why: str | None = None  # set when it is not ours

    @property
    def number(self) -> int:
        return int(self.name[1:])


@dataclass(frozen=True)
class Leftover:
    """A staging folder of a run, or a removal gc did not finish."""

    name: str
    bytes: int
    live: bool  # a staging folder whose run still holds its lock

    @property
    def kind(self) -> str:
        return "staging" if self.name.startswith(".staging-") else "deleting"

    def state(self) -> str:
        if self.kind == "deleting":
            return "an unfinished removal: curate gc finishes it"
        if self.live:
            return "in use by a live run (it holds its lock)"
        return (
            "left by an interrupted run (its lock is free): its recipe run again resumes from "
            "it; curate gc frees it"
        )


def is_dataset_folder(path: Path) -> bool:
    """A real folder with curate's bookkeeping in it, or a version that names it."""
    if path.is_symlink() or not path.is_dir():
        return False
    try:
        entries = list(os.scandir(path))
    except OSError:
        return False
    for e in entries:  # a dataset named LATEST is a folder, not a LATEST file
        if e.name == "LATEST" and e.is_file(follow_symlinks=False):
            return True
        if (e.name == ".index" or LEFTOVER_NAME.match(e.name)) and e.is_dir(follow_symlinks=False):
            return True
    return any(VERSION_NAME.match(e.name) and not_ours(path, e.name) is None for e in entries)


def dataset_folders(root: Path) -> tuple[list[Path], list[str]]:
    """The dataset folder given, or the dataset folders under an output root; and the names of
    links found among them (never followed; the folder given is taken as the user named it).
    A dataset named like a version (`v1`) under a root is a dataset, not a version of the
    root: only a manifest in it naming the root could say otherwise.
    """
    root = Path(root)
    if not root.is_dir():
        raise CurateError(f"{root} does not exist or is not a folder")
    root = root.resolve()
    if is_dataset_folder(root):
        return [root], []
    children = sorted(root.iterdir())
    links = [p.name for p in children if p.is_symlink() and p.is_dir()]
    return [p for p in children if is_dataset_folder(p)], links


def not_ours(dataset: Path, name: str) -> str | None:
    """Why `dataset/name` is not a version of this dataset, or None when it is."""
    return _read_entry(dataset, name).why


def versions(dataset: Path, held: Folder | None = None) -> list[Entry]:
    """Every folder named like a version, in version order, each ours or with a reason not.
    `held`: a descriptor on the dataset folder (gc's), through which every name is read."""
    with _held(dataset, held) as folder:
        found = [
            _read_entry(dataset, e.name, folder.fd)
            for e in folder.scandir()
            if VERSION_NAME.match(e.name) and (e.is_symlink() or e.is_dir())
        ]
    return sorted(found, key=lambda entry: entry.number)


def _read_entry(dataset: Path, name: str, dataset_fd: int | None = None) -> Entry:
    source = dataset if dataset_fd is None else dataset_fd
    manifest, _mode, why = read_manifest(source, name)  # the one reader LATEST's check uses too
    if why is not None:
        return Entry(name, why=LINK if why == "a symbolic link" else why)
    problem = naming_problem(manifest, dataset, name)
    if problem is not None:
        return Entry(name, why=problem)
    if not isinstance(manifest.get("fingerprint"), str):
        return Entry(name, why="its manifest.json has no fingerprint")
    return Entry(name, fingerprint=manifest["fingerprint"])


def leftovers(dataset: Path, held: Folder | None = None) -> list[Leftover]:
    """`.staging-*` and `.deleting-*` folders (links excluded), with their size and liveness."""
    found = []
    with _held(dataset, held) as folder:
        for e in sorted(folder.scandir(), key=lambda e: e.name):
            if LEFTOVER_NAME.match(e.name) and e.is_dir(follow_symlinks=False):
                staging = e.name.startswith(".staging-")
                lock = f".lock-{e.name.removeprefix('.staging-')}"
                live = staging and is_held(folder, None, lock)
                found.append(Leftover(e.name, freed_bytes(dataset / e.name), live))
    return found


@contextlib.contextmanager
def _held(dataset: Path, held: Folder | None) -> Iterator[Folder]:
    """The descriptor given, or one opened (and closed) here, never through a link."""
    if held is not None:
        yield held
        return
    with Folder.open(dataset) as folder:
        yield folder


def is_held(folder: Folder, inner: str | None, lock: str) -> bool:
    """Whether some process holds the lock file `lock` (in the folder `inner` of `folder`)
    shared or exclusive; creates nothing, follows no link."""
    try:
        if inner is None:
            fd = folder.open_file(lock, os.O_RDONLY)
        else:
            with folder.folder(inner) as locks:
                fd = locks.open_file(lock, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the lock taken for the probe
    return False


def regular_files(folder: Path) -> Iterator[os.stat_result]:
    """The lstat of every regular file under `folder` (links not followed, files that vanish
    meanwhile skipped): what space accounting walks."""
    for dirpath, _dirs, files in os.walk(folder):
        for name in files:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                yield st


def freed_bytes(folder: Path) -> int:
    """Bytes deleting the folder frees: files whose every hard link is inside it (versions
    may share bytes through hard links), links not followed."""
    return Freed().add(folder)


class Freed:
    """Bytes freed by deleting folders one after another, as gc deletes them: a file that
    versions share through hard links is freed with the last folder holding one of its
    links. `freed_bytes` of each folder alone never counts it (each still sees the other's
    link), so `gc --dry-run` would under-count what removing them together frees."""

    def __init__(self) -> None:
        self._seen: dict[tuple[int, int], int] = {}  # links met so far, in every folder added
        self._freed: set[tuple[int, int]] = set()

    def add(self, folder: Path) -> int:
        """The bytes deleting `folder` frees once the folders added before it are gone."""
        sizes: dict[tuple[int, int], int] = {}
        links: dict[tuple[int, int], int] = {}
        for st in regular_files(folder):
            key = (st.st_dev, st.st_ino)
            sizes[key], links[key] = st.st_size, st.st_nlink
            self._seen[key] = self._seen.get(key, 0) + 1
        freed = [k for k in sizes if k not in self._freed and self._seen[k] >= links[k]]
        self._freed.update(freed)
        return sum(sizes[k] for k in freed)

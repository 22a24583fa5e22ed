"""Versions on disk: staging folders, locks, atomic publish, and finding a version by fingerprint.

```
<root>/<name>/
  v1/ v2/ ...          published versions: immutable, read-only
  LATEST               names the newest published version
  .index/<fingerprint> names the version built from that fingerprint
  .staging-<fp>/       a run in progress (its completed partitions survive a crash)
  .lock-<fp>           held by the process building that fingerprint
  .locks/<v>.lock      held shared by every reader of version v (`Version.hold`)
  .deleting-<v>-<pid>/ a version `curate gc` is removing (curate.gc): never listed or served
```
A version becomes visible only by `rename(2)` of a complete folder, and `LATEST` is
replaced atomically, so a reader never sees a half-written version.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

from curate.errors import CurateError, shown
from curate.io.shards import fsync_dir
from curate.modes import make_dirs, open_created
from curate.phases import mark
from curate.roots import claim
from curate.sealed import VERSION_NAME, seal_problem

log = logging.getLogger(__name__)
_STAGING_SUFFIX = re.compile(r"^[0-9a-f]{20}$")  # a fingerprint's first 20 hex digits


def locks_folder(dataset: Path) -> Path:
    """The dataset folder's `.locks/`, which must not be a symbolic link: gc locks and then
    unlinks `<version>.lock` in it, and readers create their locks there. An OSError
    otherwise, which gc reports as a failure and a reader as no lock taken."""
    folder = Path(dataset) / ".locks"
    if folder.is_symlink():
        raise OSError(errno.ELOOP, ".locks is a symbolic link (gc never follows one)", str(folder))
    return folder


def write_atomic(path: Path, text: str, *, mode: int = 0o640, fsync: bool = True) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    os.fchmod(fd, mode)  # exactly `mode`, whatever the umask
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        if fsync:
            os.fsync(f.fileno())
    os.replace(tmp, path)


class Store:
    """The versions of one dataset under an output root."""

    def __init__(self, root: Path, name: str, *, dir_mode: int = 0o750, file_mode: int = 0o640):
        self.root = Path(root)
        self.name = name
        self.path = self.root / name
        self.dir_mode = dir_mode
        self.file_mode = file_mode

    # -- reading -------------------------------------------------------------------------
    def versions(self) -> list[str]:
        """Folders named like versions; a symbolic link is never one (it may lead anywhere)."""
        if not self.path.is_dir():
            return []
        found = [
            p.name
            for p in self.path.iterdir()
            if VERSION_NAME.match(p.name) and not p.is_symlink() and p.is_dir()
        ]
        return sorted(found, key=lambda v: int(v[1:]))

    def latest(self) -> str | None:
        """The version name LATEST holds; None when missing or not a version name (readers
        follow it only to a sealed version: `curate.sealed`)."""
        try:
            name = (self.path / "LATEST").read_text().strip()
        except (FileNotFoundError, UnicodeDecodeError):
            return None
        return name if VERSION_NAME.match(name) else None

    def find(self, fingerprint: str) -> Path | None:
        """The published version built from this fingerprint, if there is one (no scanning)."""
        version = self.indexed(fingerprint)
        if version is None:
            return None
        problem = seal_problem(self.path, version, fingerprint)
        if problem is not None:  # planted or damaged: build (and file) the version again
            entry = self.path / ".index" / fingerprint
            log.warning("ignoring %s: it names %r, %s", entry, version[:80], problem)
            return None
        return self.path / version

    def indexed(self, fingerprint: str) -> str | None:
        """The name the index files under this fingerprint, unchecked (`find` and
        `curate.sealed` say whether it names a sealed version, `curate.integrity` whether
        its files are intact)."""
        entry = self.path / ".index" / fingerprint
        try:
            return entry.read_text().strip()
        except (FileNotFoundError, NotADirectoryError):  # not built yet (or no root: ensure says)
            return None
        except OSError as exc:
            raise CurateError(
                f"cannot read {entry}: {exc.strerror}", at=("output", "root")
            ) from None

    # -- building ------------------------------------------------------------------------
    def ensure(self) -> None:
        try:
            claim(self.root, self.dir_mode, self.file_mode)  # refuses a root of other files
            self._mkdir(self.path)
        except OSError as exc:
            raise CurateError(
                f"cannot create output folder {shown(self.path)}: {exc.strerror}",
                at=("output", "root"),
            ) from None

    def _mkdir(self, path: Path) -> None:
        make_dirs(path, self.dir_mode)

    def own_file(self, *parts: str) -> Path:
        """The path of a file or folder of curate's own under the dataset folder (`.cache/...`,
        `.staging-*`); a CurateError when it or a folder on the way is a symbolic link, which
        would make curate read and write files wherever it leads."""
        path = self.path
        for part in parts:
            path = path / part
            if path.is_symlink():
                raise CurateError(
                    f"{shown(path)} is a symbolic link; curate reads and writes its own files "
                    "only inside the dataset folder: remove the link"
                )
        return path

    def save(self, path: Path, text: str) -> None:
        """Write a file of curate's own under the dataset folder (the content-hash cache),
        creating the folders on the way, everything with the recipe's modes."""
        self.ensure()
        self._mkdir(path.parent)
        write_atomic(path, text, mode=self.file_mode, fsync=False)

    def staging(self, fingerprint: str) -> Path:
        return self.path / f".staging-{fingerprint[:20]}"

    def build_lock_path(self, suffix: str) -> Path:
        """The lock a run holds while it builds (and owns `.staging-<suffix>`)."""
        return self.path / f".lock-{suffix}"

    @contextlib.contextmanager
    def lock(self, fingerprint: str) -> Iterator[None]:
        """One builder per fingerprint; other callers wait here, then find the version built."""
        with self._flock(self.build_lock_path(fingerprint[:20])):
            yield

    @contextlib.contextmanager
    def _flock(self, path: Path) -> Iterator[None]:
        try:
            fd = open_created(path, self.file_mode)
        except OSError as exc:  # the first file a build writes: an output folder it cannot use
            message = f"cannot write in output folder {shown(path.parent)}: {exc.strerror}"
            if exc.errno == errno.ELOOP:
                message = f"{shown(path)} is a symbolic link; curate never follows one: remove it"
            raise CurateError(message, at=("output", "root")) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def next_version(self) -> str:
        """Past every name like a version, links and foreign folders too: never published onto."""
        numbers = [int(p.name[1:]) for p in self.path.iterdir() if VERSION_NAME.match(p.name)]
        return f"v{max(numbers, default=0) + 1}"

    @contextlib.contextmanager
    def publishing(self) -> Iterator[str]:
        """Hold the dataset's publish lock and yield the name the next version will get."""
        with self._flock(self.path / ".publish.lock"):
            self._repair_latest()
            yield self.next_version()

    def repair_latest(self) -> None:
        """Cheap check (one folder listing) and, only if LATEST lags, a fix under the lock."""
        versions = self.versions()
        if versions and self.latest() != versions[-1]:
            with self._flock(self.path / ".publish.lock"):
                self._repair_latest()

    def _repair_latest(self) -> None:
        """A crash between a version's rename and LATEST's update left LATEST behind (or LATEST
        was overwritten): point it at the newest sealed version."""
        versions = self.versions()
        if versions and self.latest() != versions[-1]:
            newest = next((v for v in reversed(versions) if not seal_problem(self.path, v)), None)
            if newest is not None and newest != self.latest():
                write_atomic(self.path / "LATEST", newest + "\n", mode=self.file_mode)

    def drop_leftover_staging(self, fingerprint: str) -> None:
        """A published fingerprint needs no staging: one left by a crash after the rename goes."""
        staging = self.staging(fingerprint)
        if staging.exists():
            with self.try_exclusive(self.build_lock_path(fingerprint[:20])) as free:
                if free:
                    self.discard(staging)

    def clean_stale(self, fingerprint: str) -> list[Path]:
        """Remove staging folders of other fingerprints whose builder is gone (its lock is free).

        A live run of another recipe holds its lock, so its staging is never touched; ours is
        kept for resuming.
        """
        removed = []
        for staging in sorted(self.path.glob(".staging-*")):
            suffix = staging.name.removeprefix(".staging-")
            if not _STAGING_SUFFIX.match(suffix):  # named so by someone else: not ours
                continue
            if suffix == fingerprint[:20]:
                continue
            with self.try_exclusive(self.build_lock_path(suffix)) as free:
                if free:
                    self.discard(staging)
                    removed.append(staging)
        return removed

    def publish(self, folder: Path, version: str, fingerprint: str, *, fsync: bool = True) -> Path:
        """Make a complete folder visible as `version` (call inside `publishing()`)."""
        target = self.path / version
        read_only_dir, read_only_file = self.dir_mode & ~0o222, self.file_mode & ~0o222
        _seal(folder, read_only_dir, read_only_file)
        if fsync:
            fsync_dir(folder)
        index = self.own_file(".index")  # never a link out of the dataset folder
        self._mkdir(index)
        # The index entry first: it means nothing until the folder exists, and once the folder
        # appears a crash cannot leave it unfindable (LATEST is repaired at the next publish).
        write_atomic(index / fingerprint, version + "\n", mode=self.file_mode, fsync=fsync)
        os.rename(folder, target)
        mark("publish")  # a crash test may cut the power here: visible, but LATEST not yet moved
        os.chmod(target, read_only_dir)  # after the move: moving a folder needs it writable
        write_atomic(self.path / "LATEST", version + "\n", mode=self.file_mode, fsync=fsync)
        if fsync:
            fsync_dir(self.path)
        return target

    # -- readers' locks (curate.gc deletes versions) ------------------------------------
    def read_lock_path(self, version: str) -> Path:
        """Where version's read lock lives; an OSError when `.locks` is a symbolic link (gc
        would lock and unlink `<version>.lock` wherever it leads)."""
        return locks_folder(self.path) / f"{version}.lock"

    @contextlib.contextmanager
    def try_exclusive(self, path: Path) -> Iterator[bool]:
        """Hold `path`'s lock exclusively if no one holds it (True), else yield False at once."""
        self._mkdir(path.parent)
        fd = open_created(path, self.file_mode, os.O_RDWR | os.O_NOFOLLOW)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)

    def discard(self, folder: Path) -> None:
        if folder.exists() and not folder.is_symlink():  # a link is not a staging folder of ours
            remove_tree(folder)


def _seal(folder: Path, dir_mode: int, file_mode: int) -> None:
    """Published versions are read-only: a trainer's tools must not write into them."""
    for dirpath, _dirnames, filenames in os.walk(folder, topdown=False):
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), file_mode)
        if Path(dirpath) != folder:
            os.chmod(dirpath, dir_mode)


_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def remove_tree(folder: Path, phase: str | None = None) -> None:
    """Delete a folder curate made, sealed or not, never through a symbolic link.

    Every folder is opened with O_NOFOLLOW relative to its parent's descriptor, so a link
    (at the top, inside, or swapped in meanwhile) is unlinked, never entered or chmod-ed.
    `manifest.json` goes first: a folder half-deleted never looks like a version. `phase`
    is marked once per file removed (crash tests kill gc there).
    """
    parent = os.open(folder.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _remove_dir(parent, folder.name, phase)
    finally:
        os.close(parent)


def _remove_dir(parent: int, name: str, phase: str | None) -> None:
    fd = os.open(name, _DIR, dir_fd=parent)
    try:
        os.fchmod(fd, 0o700)  # a sealed version's folders are read-only
        with os.scandir(fd) as listing:
            entries = sorted(listing, key=lambda e: e.name != "manifest.json")
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                _remove_dir(fd, entry.name, phase)
            else:
                os.unlink(entry.name, dir_fd=fd)
                if phase:
                    mark(phase)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent)

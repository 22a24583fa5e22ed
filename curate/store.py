"""Versions on disk: staging folders, locks, atomic publish, and finding a version by fingerprint.

```
<root>/<name>/
  v1/ v2/ ...          published versions: immutable, read-only
  LATEST               names the newest published version
  .index/<fingerprint> names the version built from that fingerprint, or (an alias,
                       "same-as <fingerprint>") the fingerprint of a version built
                       from inputs of the same content (`curate.same_content`)
  .staging-<fp>/       a run in progress (its completed partitions survive a crash)
  .lock-<fp>           held by the process building that fingerprint
  .locks/<v>.lock      held shared by every reader of version v (`Version.hold`)
  .deleting-<v>-<pid>/ a version `curate gc` is removing (curate.gc): never listed or served
  .mixtures/<key>-<v>  a mixture draws from version v (curate.mixture_refs): gc keeps it
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
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from curate.dirfd import Folder
from curate.errors import CurateError, shown
from curate.modes import make_dirs
from curate.phases import mark
from curate.roots import claim
from curate.sealed import VERSION_NAME, sealed_manifest
from curate.staging.names import OUT

log = logging.getLogger(__name__)
_STAGING_SUFFIX = re.compile(r"^[0-9a-f]{20}$")  # a fingerprint's first 20 hex digits
_FINGERPRINT = re.compile(r"^[0-9a-f]{64}$")
ALIAS = "same-as "  # an .index entry naming another fingerprint (`Store.alias`)
_OWN = "curate reads and writes its own files only inside the dataset folder: remove the link"


class Store:
    """The versions of one dataset under an output root.

    Everything curate keeps in the dataset folder is reached through one descriptor on it
    (`dataset()`, opened once, never through a link at its name) and one name at a time
    with O_NOFOLLOW (`curate.dirfd`): a link planted at `.locks`, `.cache`, `.index`,
    `LATEST`, a lock or a staging folder, before or during a run, is refused, never
    followed."""

    def __init__(self, root: Path, name: str, *, dir_mode: int = 0o750, file_mode: int = 0o640):
        self.root = Path(root)
        self.name = name
        self.path = self.root / name
        self.dir_mode = dir_mode
        self.file_mode = file_mode
        self._dataset: Folder | None = None

    def dataset(self) -> Folder:
        """The dataset folder, held open (FileNotFoundError before `ensure` made it; an
        OSError naming the link when it is one)."""
        if self._dataset is None:
            self._dataset = Folder.open(self.path)
        return self._dataset

    def use(self, dataset: Folder) -> None:
        """Work through a descriptor the caller already holds on the dataset folder (gc)."""
        self._dataset = dataset

    def close(self) -> None:
        if self._dataset is not None:
            self._dataset.close()
            self._dataset = None

    def _link(self, exc: OSError) -> CurateError:
        """The error for a link refused in the dataset folder, or at the dataset folder."""
        if exc.filename == os.fspath(self.path):
            message = f"cannot write in output folder {shown(self.path)}: {exc.strerror}"
        else:
            message = f"{shown(exc.filename)} is a symbolic link; {_OWN}"
        return CurateError(message, at=("output", "root"))

    # -- reading -------------------------------------------------------------------------
    def versions(self) -> list[str]:
        """Folders named like versions; a symbolic link is never one (it may lead anywhere)."""
        try:
            entries = self.dataset().scandir()
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise self._link(exc) from None
            raise
        found = [
            e.name
            for e in entries
            if VERSION_NAME.match(e.name) and e.is_dir(follow_symlinks=False)
        ]
        return sorted(found, key=lambda v: int(v[1:]))

    def latest(self) -> str | None:
        """The version name LATEST holds; None when missing, not a regular file or not a
        version name (readers follow it only to a sealed version: `curate.sealed`)."""
        try:
            name = self.dataset().read_text("LATEST").strip()
        except (OSError, UnicodeDecodeError):
            return None
        return name if VERSION_NAME.match(name) else None

    def find(self, fingerprint: str) -> Path | None:
        """The published version built from this fingerprint, if there is one (no scanning)."""
        filed = self.filed(fingerprint)
        if filed is None:
            return None
        built_from, version = filed
        problem = self.sealed(version, built_from)[1]
        if problem is not None:  # planted or damaged: build (and file) the version again
            entry = self.path / ".index" / fingerprint
            log.warning("ignoring %s: it names %r, %s", entry, version[:80], problem)
            return None
        return self.path / version

    def sealed(self, version: str, fingerprint: str | None = None) -> tuple[Any, str | None]:
        """`curate.sealed.sealed_manifest` of a version in this dataset folder, read through
        the folder held open."""
        return sealed_manifest(self.path, version, fingerprint, dataset_fd=self.dataset().fd)

    def indexed(self, fingerprint: str) -> str | None:
        """The name the index files under this fingerprint (through an alias), unchecked
        (`find` and `curate.sealed` say whether it names a sealed version, `curate.integrity`
        whether its files are intact)."""
        filed = self.filed(fingerprint)
        return None if filed is None else filed[1]

    def filed(self, fingerprint: str) -> tuple[str, str] | None:
        """(the fingerprint the version was built from, the version's name) for this
        fingerprint: its own entry, or the entry its alias names (`alias`; followed once,
        never a chain). A version is sealed with the fingerprint it was built from, which
        its manifest names: the one to check it against."""
        text = self._index_entry(fingerprint)
        if text is None or not text.startswith(ALIAS):
            return None if text is None else (fingerprint, text)
        target = text.removeprefix(ALIAS)
        if not _FINGERPRINT.match(target):
            return None
        name = self._index_entry(target)
        if name is None or name.startswith(ALIAS):
            return None
        return target, name

    def _index_entry(self, fingerprint: str) -> str | None:
        entry = self.path / ".index" / fingerprint
        try:
            with self.dataset().folder(".index") as index:
                return index.read_text(fingerprint).strip()
        except (FileNotFoundError, NotADirectoryError):  # not built yet (or no root: ensure says)
            return None
        except UnicodeDecodeError:  # not written by curate: no entry of ours
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise self._link(exc) from None
            raise CurateError(
                f"cannot read {entry}: {exc.strerror}", at=("output", "root")
            ) from None

    def alias(self, fingerprint: str, same_as: str) -> None:
        """File `fingerprint` as naming whatever `same_as`'s entry names: the content
        fingerprint of a build, and the stat fingerprint of inputs touched since
        (`curate.same_content`). An alias names a fingerprint, not a version, so it follows
        a rebuild of that fingerprint and leads nowhere once gc unlists its version. It is
        trusted as `.cache` is (what its fingerprint's version holds is checked; that the two
        fingerprints' inputs hold the same bytes was checked when it was written)."""
        if fingerprint == same_as or not _FINGERPRINT.match(same_as):
            return
        try:
            with self.dataset().folder(".index", self.dir_mode) as index:
                text = f"{ALIAS}{same_as}\n"
                index.write_atomic(fingerprint, text, self.file_mode, fsync=False)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise self._link(exc) from None
            raise

    # -- building ------------------------------------------------------------------------
    def ensure(self) -> None:
        try:
            claim(self.root, self.dir_mode, self.file_mode)  # refuses a root of other files
            make_dirs(self.path, self.dir_mode)
        except OSError as exc:
            raise CurateError(
                f"cannot create output folder {shown(self.path)}: {exc.strerror}",
                at=("output", "root"),
            ) from None
        try:
            self.dataset()
        except OSError as exc:  # e.g. a link: what it leads to is no folder of this root's
            raise CurateError(
                f"cannot write in output folder {shown(self.path)}: {exc.strerror}",
                at=("output", "root"),
            ) from None

    def read_own(self, folder: str, name: str) -> str | None:
        """A file of curate's own in a folder of the dataset folder (`.cache/...`), or None
        when there is none yet; a CurateError when the folder or the file is a link."""
        try:
            with self.dataset().folder(folder) as inner:
                return inner.read_text(name)
        except (FileNotFoundError, NotADirectoryError, UnicodeDecodeError):
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise self._link(exc) from None
            return None

    def save_own(self, folder: str, name: str, text: str) -> None:
        """Write a file of curate's own (the content-hash cache) into a folder of the dataset
        folder, creating both, everything with the recipe's modes."""
        self.ensure()
        try:
            with self.dataset().folder(folder, self.dir_mode) as inner:
                inner.write_atomic(name, text, self.file_mode, fsync=False)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise self._link(exc) from None
            raise

    def staging(self, fingerprint: str) -> Path:
        return self.path / self.staging_name(fingerprint)

    @staticmethod
    def staging_name(fingerprint: str) -> str:
        return f".staging-{fingerprint[:20]}"

    def open_staging(self, fingerprint: str) -> Folder:
        """The build's staging folder, created if missing, held open (a link: CurateError)."""
        try:
            return self.dataset().folder(self.staging_name(fingerprint), self.dir_mode)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise self._link(exc) from None
            raise

    def check_staging(self, fingerprint: str, staging: Folder) -> None:
        """The staging folder's name still leads to the folder this build wrote (a link or
        another folder swapped in during the run: CurateError, nothing is published)."""
        name = self.staging_name(fingerprint)
        if not self.dataset().same_as(name, staging):
            raise CurateError(
                f"{shown(self.path / name)} was replaced while this run wrote into it (by a "
                "symbolic link or another folder); nothing published: check who else writes "
                "the output root",
                at=("output", "root"),
            )

    def build_lock_name(self, suffix: str) -> str:
        """The lock a run holds while it builds (and owns `.staging-<suffix>`)."""
        return f".lock-{suffix}"

    @contextlib.contextmanager
    def lock(self, fingerprint: str) -> Iterator[None]:
        """One builder per fingerprint; other callers wait here, then find the version built."""
        with self._flock(self.build_lock_name(fingerprint[:20])):
            yield

    @contextlib.contextmanager
    def _flock(self, name: str) -> Iterator[None]:
        path = self.path / name
        try:
            fd = self.dataset().open_file(name, os.O_RDWR, self.file_mode)
        except OSError as exc:  # the first file a build writes: an output folder it cannot use
            message = f"cannot write in output folder {shown(self.path)}: {exc.strerror}"
            if exc.errno == errno.ELOOP and exc.filename == os.fspath(path):
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
        names = [e.name for e in self.dataset().scandir()]
        numbers = [int(n[1:]) for n in names if VERSION_NAME.match(n)]
        return f"v{max(numbers, default=0) + 1}"

    @contextlib.contextmanager
    def publishing(self) -> Iterator[str]:
        """Hold the dataset's publish lock and yield the name the next version will get."""
        with self._flock(".publish.lock"):
            self._repair_latest()
            yield self.next_version()

    def repair_latest(self) -> None:
        """Cheap check (one folder listing) and, only if LATEST lags, a fix under the lock."""
        versions = self.versions()
        if versions and self.latest() != versions[-1]:
            with self._flock(".publish.lock"):
                self._repair_latest()

    def _repair_latest(self) -> None:
        """A crash between a version's rename and LATEST's update left LATEST behind (or LATEST
        was overwritten): point it at the newest sealed version."""
        versions = self.versions()
        if versions and self.latest() != versions[-1]:
            newest = next((v for v in reversed(versions) if not self.sealed(v)[1]), None)
            if newest is not None and newest != self.latest():
                self.dataset().write_atomic("LATEST", newest + "\n", self.file_mode)

    def drop_leftover_staging(self, fingerprint: str) -> None:
        """A published fingerprint needs no staging: one left by a crash after the rename goes."""
        name = self.staging_name(fingerprint)
        try:
            self.dataset().lstat(name)
        except OSError:
            return
        with self.try_exclusive(self.dataset(), self.build_lock_name(fingerprint[:20])) as free:
            if free:
                self.discard(name)

    def clean_stale(self, fingerprint: str) -> list[Path]:
        """Remove staging folders of other fingerprints whose builder is gone (its lock is free).

        A live run of another recipe holds its lock, so its staging is never touched; ours is
        kept for resuming.
        """
        removed = []
        names = sorted(e.name for e in self.dataset().scandir() if e.name.startswith(".staging-"))
        for name in names:
            suffix = name.removeprefix(".staging-")
            if not _STAGING_SUFFIX.match(suffix):  # named so by someone else: not ours
                continue
            if suffix == fingerprint[:20]:
                continue
            with self.try_exclusive(self.dataset(), self.build_lock_name(suffix)) as free:
                if free:
                    self.discard(name)
                    removed.append(self.path / name)
        return removed

    def publish(
        self, staging: Folder, version: str, fingerprint: str, *, fsync: bool = True
    ) -> Path:
        """Make the staging folder's complete `out` visible as `version` (call inside
        `publishing()`): sealed, filed in the index, renamed, each relative to the folders
        held open."""
        self.check_staging(fingerprint, staging)
        dataset = self.dataset()
        read_only_dir, read_only_file = self.dir_mode & ~0o222, self.file_mode & ~0o222
        try:  # a link in the version or at `.index` is refused by name, nothing published
            with staging.folder(OUT) as out:
                _seal(out, read_only_dir, read_only_file)
                if fsync:
                    out.fsync()
            index = dataset.folder(".index", self.dir_mode)  # never a link out of the folder
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise self._link(exc) from None
            raise
        # The index entry first: it means nothing until the folder exists, and once the folder
        # appears a crash cannot leave it unfindable (LATEST is repaired at the next publish).
        with index:
            index.write_atomic(fingerprint, version + "\n", self.file_mode, fsync=fsync)
        staging.rename(OUT, dataset, version)
        mark("publish")  # a crash test may cut the power here: visible, but LATEST not yet moved
        with dataset.folder(version) as target:
            target.chmod(read_only_dir)  # after the move: moving a folder needs it writable
        dataset.write_atomic("LATEST", version + "\n", self.file_mode, fsync=fsync)
        if fsync:
            dataset.fsync()
        return self.path / version

    # -- readers' locks (curate.gc deletes versions) ------------------------------------
    def locks(self) -> Folder:
        """The dataset folder's `.locks/`, created if missing, never through a link: gc locks
        and then unlinks `<version>.lock` in it, and readers create their locks there."""
        return self.dataset().folder(".locks", self.dir_mode)

    @contextlib.contextmanager
    def try_exclusive(self, folder: Folder, name: str) -> Iterator[bool]:
        """Hold the lock file `name` in `folder` exclusively if no one holds it (True), else
        yield False at once."""
        fd = folder.open_file(name, os.O_RDWR, self.file_mode)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)

    def discard(self, name: str) -> None:
        """Remove a folder of ours in the dataset folder (a staging folder); a link there is
        not ours and stays, missing is fine."""
        try:
            mode = self.dataset().lstat(name).st_mode
        except OSError:
            return
        if stat.S_ISDIR(mode):
            self.dataset().remove_tree(name)


def _seal(folder: Folder, dir_mode: int, file_mode: int) -> None:
    """Published versions are read-only: a trainer's tools must not write into them. Every
    file and folder is changed through a descriptor opened without following a link (a link
    found in a version about to be published fails the publish)."""
    for entry in folder.scandir():
        if entry.is_dir(follow_symlinks=False):
            with folder.folder(entry.name) as inner:
                _seal(inner, dir_mode, file_mode)
                inner.chmod(dir_mode)
        else:
            fd = folder.open_file(entry.name, os.O_RDONLY | os.O_NONBLOCK)
            try:
                os.fchmod(fd, file_mode)
            finally:
                os.close(fd)


def remove_tree(folder: Path, phase: str | None = None) -> None:
    """Delete a folder curate made, sealed or not, never through a symbolic link
    (`Folder.remove_tree`, from a descriptor on its parent)."""
    with Folder(os.open(folder.parent, os.O_RDONLY | os.O_DIRECTORY), folder.parent) as parent:
        parent.remove_tree(folder.name, phase)

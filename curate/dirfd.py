"""A folder held open by descriptor, so the names curate uses in it resolve in that folder.

Checking a path (`is_symlink()`) and then opening it by name leaves a window: anyone who
may write the folder can swap a symbolic link in between, and the open, write, chmod or
unlink then acts wherever the link leads. A `Folder` is opened once, with O_NOFOLLOW on
its own name (a link there is refused), and every operation takes one name inside it and
resolves it against that descriptor in the same system call that uses it: `open` with
O_NOFOLLOW, or calls that never follow their last component (`mkdir`, `rename`, `unlink`,
`rmdir`, `lstat`). A link planted at any moment is refused (ELOOP) or, for removal,
unlinked, never followed. `curate.store` (a dataset folder's `.locks`, `.cache`, `.index`,
`LATEST`, locks, staging and publishing) and `curate.gc` do all their work through this.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

from curate.phases import mark

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK  # a named pipe must not block a reader
LINK = "a symbolic link (curate never follows one)"


def link_error(path: Path | str) -> OSError:
    return OSError(errno.ELOOP, LINK, os.fspath(path))


class Folder:
    """An open folder that was not reached through a link at its own name."""

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path

    @classmethod
    def open(cls, path: Path | str) -> Folder:
        """`path` itself must not be a link (its parents are taken as named)."""
        path = Path(path)
        try:
            return cls(os.open(path, _DIR), path)
        except OSError as exc:
            raise _why(exc, path, lambda: os.lstat(path)) from None

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __del__(self, _close: Callable[[int], None] = os.close) -> None:
        # Bound at definition and never raising: at interpreter exit globals may be gone.
        fd = self.__dict__.get("fd", -1)
        if fd >= 0:
            self.fd = -1
            try:  # noqa: SIM105  (contextlib may be torn down already)
                _close(fd)
            except OSError:
                pass

    # -- folders ---------------------------------------------------------------------
    def folder(self, name: str, mode: int | None = None) -> Folder:
        """The folder `name` in this one, created with exactly `mode` when missing and
        `mode` is given (else FileNotFoundError)."""
        try:
            try:
                fd = os.open(name, _DIR, dir_fd=self.fd)  # usually there: one call
            except FileNotFoundError:
                if mode is None:
                    raise
                try:
                    os.mkdir(name, 0o700, dir_fd=self.fd)
                except FileExistsError:  # made meanwhile by another process
                    return self.folder(name)
                fd = os.open(name, _DIR, dir_fd=self.fd)
                os.fchmod(fd, mode)  # exactly the mode asked for, whatever the umask
        except OSError as exc:
            raise _why(exc, self.path / name, lambda: self.lstat(name)) from None
        return Folder(fd, self.path / name)

    def lstat(self, name: str) -> os.stat_result:
        return os.stat(name, dir_fd=self.fd, follow_symlinks=False)

    def scandir(self) -> list[os.DirEntry[str]]:
        with os.scandir(self.fd) as listing:
            return list(listing)

    def same_as(self, name: str, other: Folder) -> bool:
        """Whether `name` here is (still) the very folder `other` holds open."""
        try:
            st = self.lstat(name)
        except OSError:
            return False
        held = os.fstat(other.fd)
        return stat.S_ISDIR(st.st_mode) and (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino)

    def chmod(self, mode: int) -> None:
        os.fchmod(self.fd, mode)

    def fsync(self) -> None:
        os.fsync(self.fd)

    # -- files -----------------------------------------------------------------------
    def open_file(self, name: str, flags: int = os.O_RDWR, mode: int | None = None) -> int:
        """A descriptor on the file `name`, never through a link (ELOOP); created with exactly
        `mode` when it is given and the file is missing (an existing file keeps its mode: it
        may be another user's)."""
        flags |= os.O_NOFOLLOW
        try:
            try:
                return os.open(name, flags, dir_fd=self.fd)  # usually there: one call
            except FileNotFoundError:
                if mode is None:
                    raise
            try:
                fd = os.open(name, flags | os.O_CREAT | os.O_EXCL, mode, dir_fd=self.fd)
            except FileExistsError:  # made meanwhile by another process
                return os.open(name, flags, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise link_error(self.path / name) from None
            raise
        os.fchmod(fd, mode)
        return fd

    def read_text(self, name: str) -> str:
        """A regular file's text (a link, a pipe or a device: OSError)."""
        fd = self.open_file(name, _READ)
        with open(fd, encoding="utf-8") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, "not a regular file", os.fspath(self.path / name))
            return f.read()

    def write_atomic(self, name: str, text: str, mode: int, *, fsync: bool = True) -> None:
        """Replace `name` with a complete new file of exactly `mode` (rename(2) of a temporary
        file created here with O_EXCL|O_NOFOLLOW: a link planted at its name is never written
        through)."""
        tmp = f".{name}.tmp-{os.getpid()}"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=self.fd)  # a stale one of ours, or a link someone planted
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW  # a new file, or none
        fd = os.open(tmp, flags, mode, dir_fd=self.fd)
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.rename(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def unlink(self, name: str) -> None:
        os.unlink(name, dir_fd=self.fd)

    def rename(self, name: str, to: Folder, new: str) -> None:
        os.rename(name, new, src_dir_fd=self.fd, dst_dir_fd=to.fd)

    # -- removing --------------------------------------------------------------------
    def remove_tree(self, name: str, phase: str | None = None) -> None:
        """Delete the folder `name` curate made, sealed or not, never through a link.

        Every folder is opened with O_NOFOLLOW relative to its parent's descriptor, so a link
        (at the top, inside, or swapped in meanwhile) is unlinked, never entered or chmod-ed.
        `manifest.json` goes first: a folder half-deleted never looks like a version. `phase`
        is marked once per file removed (crash tests kill gc there).
        """
        _remove_dir(self.fd, name, phase)


def write_atomic(path: Path, text: str, *, mode: int = 0o640, fsync: bool = True) -> None:
    """Replace the file at `path` (in a folder of the build's own, e.g. a staging folder)."""
    with Folder(os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY), path.parent) as folder:
        folder.write_atomic(path.name, text, mode, fsync=fsync)


def _why(exc: OSError, path: Path, lstat: Callable[[], os.stat_result]) -> OSError:
    """A folder that could not be opened: say so plainly when it is a link (O_DIRECTORY with
    O_NOFOLLOW gives ENOTDIR or ELOOP for one)."""
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        try:
            if stat.S_ISLNK(lstat().st_mode):
                return link_error(path)
        except OSError:
            pass
    return exc


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

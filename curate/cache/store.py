"""The stage cache on disk: entries by key, checked before reuse, least recently used evicted.

Every run that uses the cache holds `.lock` shared (`using()`; `get` and `writer` take it
in any process that did not), so `evict` and `clear`, which need it exclusive, never
remove a file a run may be reading: they try once and skip when the cache is busy. An
entry appears by one rename (`writer.EntryWriter`) and disappears by one rename to a
temp name before it is deleted, so a reader sees a whole entry or none. A damaged entry
(its files no longer match the sizes and xxh3_128 in its meta.json) is removed and
recomputed, never trusted. Only what the cache made is ever deleted: entry folders whose
meta.json is ours for their key, and folders named like its temp folders; anything else
found in the root is left alone. Everything is reached through descriptors opened
without following a link (`curate.dirfd`). Layout and names: `curate.cache.names`.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import stat
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curate.cache.meta import check_files, read_meta
from curate.cache.names import KEY, LOCK, META, SHARD, TEMP, check_key
from curate.cache.writer import EntryWriter, temp_name
from curate.dirfd import Folder
from curate.modes import make_dirs

log = logging.getLogger(__name__)
_OPEN: weakref.WeakSet[StageCache] = weakref.WeakSet()  # handles holding descriptors


@dataclass(frozen=True)
class CacheSpec:
    """Where the cache lives and how it writes; picklable, so workers get it with a task."""

    root: Path  # <dataset folder>/.cache/stages
    budget: int  # bytes kept after eviction
    file_mode: int = 0o640
    dir_mode: int = 0o750
    fsync: bool = True


@dataclass(frozen=True)
class Entry:
    """A committed entry whose every file was just checked against its meta.json."""

    key: str
    meta: dict[str, Any]
    path: Path
    names: frozenset[str]

    def file(self, name: str) -> Path | None:
        """The file `name` of the entry; None when the entry has no such file."""
        return self.path / name if name in self.names else None


@dataclass(frozen=True)
class _Stored:
    shard: str
    key: str
    used_ns: int  # meta.json's mtime: set at commit, touched by every get
    bytes: int


class StageCache:
    """One process's handle on a cache root (descriptors are per process: a forked or
    unpickled copy opens its own)."""

    def __init__(self, spec: CacheSpec, *, create: bool = True) -> None:
        self.spec = spec
        self._create = create
        self._pid = os.getpid()
        self._root: Folder | None = None
        self._lock = -1  # a descriptor on .lock, held shared
        self._uses = 0

    def __getstate__(self) -> dict[str, Any]:
        return {"spec": self.spec, "create": self._create}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["spec"], create=state["create"])  # type: ignore[misc]

    # -- the root and its lock -----------------------------------------------------------
    def root(self) -> Folder:
        """The cache root, held open (made with the recipe's modes when missing and `create`;
        a link at it or at `.cache` is refused, ELOOP)."""
        if self._pid != os.getpid():  # forked: the parent's descriptors are not ours to use
            self._forget()
        if self._root is None:
            _OPEN.add(self)
            root = self.spec.root
            if self._create:
                make_dirs(root.parent, self.spec.dir_mode)
            with Folder.open(root.parent) as parent:
                self._root = parent.folder(root.name, self.spec.dir_mode if self._create else None)
        return self._root

    @contextlib.contextmanager
    def using(self) -> Iterator[StageCache]:
        """Hold the cache for a run: no eviction or clear removes anything meanwhile. The
        first holder while nobody else holds it sweeps the temp folders killed runs left."""
        if self._uses == 0 and self._lock_fd() < 0:
            self._take_lock(sweep=True)
        self._uses += 1
        try:
            yield self
        finally:
            self._uses -= 1
            if self._uses == 0:
                self.close()

    def close(self) -> None:
        """Release the lock and the root (in the process that opened them)."""
        if self._pid != os.getpid():
            self._forget()
            return
        lock, self._lock = self._lock, -1
        if lock >= 0:
            os.close(lock)  # releases the shared lock
        if self._root is not None:
            self._root.close()
            self._root = None

    def _forget(self) -> None:
        """Drop descriptors inherited by fork without unlocking: closing our copies leaves the
        parent's lock as it is, and the parent's release is not held up by this process."""
        for fd in (self._lock, self._root.fd if self._root is not None else -1):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        if self._root is not None:
            self._root.fd = -1
        self._root, self._lock, self._uses, self._pid = None, -1, 0, os.getpid()

    def _lock_fd(self) -> int:
        if self._pid != os.getpid():
            self._forget()
        return self._lock

    def _take_lock(self, sweep: bool = False) -> None:
        root = self.root()
        fd = root.open_file(LOCK, os.O_RDWR, self.spec.file_mode)
        try:
            if sweep:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    self._sweep()
                except BlockingIOError:
                    pass
            fcntl.flock(fd, fcntl.LOCK_SH)  # after a sweep: a downgrade
        except BaseException:
            os.close(fd)
            raise
        self._lock = fd

    def _hold(self) -> Folder:
        if self._lock_fd() < 0:
            self._take_lock()
        return self.root()

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[bool]:
        """The lock exclusive if nobody else holds it (True), else False at once. Our own
        shared hold is converted and given back (a failed conversion drops it: flock(2))."""
        own = self._lock_fd()
        fd = own if own >= 0 else self.root().open_file(LOCK, os.O_RDWR, self.spec.file_mode)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if own >= 0:
                    fcntl.flock(fd, fcntl.LOCK_SH)
                yield False
                return
            try:
                yield True
            finally:
                if own >= 0:
                    fcntl.flock(fd, fcntl.LOCK_SH)
        finally:
            if own < 0:
                os.close(fd)

    # -- entries -------------------------------------------------------------------------
    def get(self, key: str) -> Entry | None:
        """The entry committed under `key`, every file checked against the size and xxh3_128
        recorded at commit, and marked used; None when there is none or it is damaged (then
        removed: the caller recomputes it)."""
        check_key(key)
        root = self._hold()
        try:
            with root.folder(key[:2]) as shard:
                with shard.folder(key) as folder:
                    data = read_meta(folder, key)
                    if data is None:
                        log.warning("stage cache: %s has no meta.json of curate's: not used, "
                                    "left alone", self.spec.root / key[:2] / key)  # fmt: skip
                        return None
                    problem = check_files(folder, data["files"])
                    if problem is None:
                        with contextlib.suppress(OSError):  # LRU mark; read-only: just unmarked
                            os.utime(META, dir_fd=folder.fd, follow_symlinks=False)
                        path = self.spec.root / key[:2] / key
                        return Entry(key, data["meta"], path, frozenset(data["files"]))
                log.warning("stage cache entry %s is damaged (%s): removed, recomputed", key,
                            problem)  # fmt: skip
                self._drop(shard, key)
                return None
        except FileNotFoundError:
            return None
        except OSError as exc:  # a link planted in the cache, a folder we cannot read
            log.warning("stage cache entry %s not used: %s", key, exc)
            return None

    def open_file(self, entry: Entry, name: str) -> int:
        """A read-only descriptor on the file `name` of `entry`, opened through the cache
        root this process holds (never by path: a link swapped in for `.cache` meanwhile
        leads nowhere)."""
        root = self._hold()
        with root.folder(check_key(entry.key)[:2]) as shard, shard.folder(entry.key) as folder:
            return folder.open_file(name, os.O_RDONLY)

    def writer(self, key: str) -> EntryWriter:
        """A new entry for `key`, visible only once committed."""
        check_key(key)
        self._hold()
        return EntryWriter(self, key)

    def discard(self, key: str) -> None:
        """Remove the entry committed under `key` when it is one of ours (its meta.json ours
        for the key); nothing else is touched."""
        check_key(key)
        root = self._hold()
        try:
            with root.folder(key[:2]) as shard:
                with shard.folder(key) as folder:
                    if read_meta(folder, key) is None:
                        return
                self._drop(shard, key)
        except FileNotFoundError:
            return

    def _drop(self, shard: Folder, key: str) -> None:
        """Remove an entry: renamed away first (one step), then deleted."""
        root = self.root()
        doomed = temp_name()
        try:
            shard.rename(key, root, doomed)
        except FileNotFoundError:  # another process dropped it first
            return
        root.remove_tree(doomed)

    # -- size, eviction, clearing --------------------------------------------------------
    def size(self) -> int:
        """Bytes of every regular file in the cache root (links not followed)."""
        return tree_bytes(self.root().fd)

    def evict(self) -> int:
        """Remove the least recently used entries until the cache fits its budget; the bytes
        freed. Skipped (0) while another run holds the cache."""
        with self._exclusive() as free:
            if not free:
                log.info("stage cache %s is in use by another run: eviction skipped",
                         self.spec.root)  # fmt: skip
                return 0
            self._sweep()
            entries = sorted(self._entries(), key=lambda e: (e.used_ns, e.key))
            total, freed = sum(e.bytes for e in entries), 0
            for entry in entries:
                if total <= self.spec.budget:
                    break
                self._remove(entry)
                total -= entry.bytes
                freed += entry.bytes
            return freed

    def clear(self, dry_run: bool = False) -> int:
        """Remove every entry; the bytes freed (or that would be). 0 when busy."""
        return self.try_clear(dry_run) or 0

    def try_clear(self, dry_run: bool = False) -> int | None:
        """As `clear`, but None when another run holds the cache (nothing removed)."""
        if dry_run:
            return sum(e.bytes for e in self._entries()) + self._temp_bytes()
        with self._exclusive() as free:
            if not free:
                log.info("stage cache %s is in use by another run: not cleared", self.spec.root)
                return None
            freed = self._temp_bytes()
            self._sweep()
            for entry in self._entries():
                self._remove(entry)
                freed += entry.bytes
            root = self.root()
            for shard in root.scandir():  # emptied shard folders (ours by name) go too
                if SHARD.fullmatch(shard.name) and shard.is_dir(follow_symlinks=False):
                    with contextlib.suppress(OSError):
                        os.rmdir(shard.name, dir_fd=root.fd)
            return freed

    def _entries(self) -> list[_Stored]:
        """Committed entries of ours (meta.json ours for the key), with size and last use."""
        root = self.root()
        found = []
        for s in root.scandir():
            if not (SHARD.fullmatch(s.name) and s.is_dir(follow_symlinks=False)):
                continue
            try:
                shard = root.folder(s.name)
            except OSError:
                continue
            with shard:
                for e in shard.scandir():
                    if not (KEY.fullmatch(e.name) and e.name[:2] == s.name):
                        continue
                    with contextlib.suppress(OSError), shard.folder(e.name) as folder:
                        if read_meta(folder, e.name) is not None:
                            used = folder.lstat(META).st_mtime_ns
                            found.append(_Stored(s.name, e.name, used, tree_bytes(folder.fd)))
        return found

    def _remove(self, entry: _Stored) -> None:
        with contextlib.suppress(FileNotFoundError), self.root().folder(entry.shard) as shard:
            self._drop(shard, entry.key)

    def _temps(self) -> list[str]:
        return [
            e.name
            for e in self.root().scandir()
            if TEMP.fullmatch(e.name) and e.is_dir(follow_symlinks=False)
        ]

    def _temp_bytes(self) -> int:
        total = 0
        root = self.root()
        for name in self._temps():
            with contextlib.suppress(OSError), root.folder(name) as folder:
                total += tree_bytes(folder.fd)
        return total

    def _sweep(self) -> None:
        """Temp folders of killed writers (call holding the lock exclusive: no live ones)."""
        root = self.root()
        for name in self._temps():
            with contextlib.suppress(FileNotFoundError):
                root.remove_tree(name)
                log.debug("stage cache: removed %s left by a killed run", name)


def _forget_in_child() -> None:
    """A forked process (a worker pool forks while the run holds the cache) closes its copies
    of every handle's descriptors at once: a copy kept would hold the parent's shared lock
    for as long as the child lives, after the parent released it, and eviction would find
    the cache busy. A child that uses the cache takes a hold of its own."""
    for cache in list(_OPEN):
        cache._forget()


os.register_at_fork(after_in_child=_forget_in_child)


def tree_bytes(fd: int) -> int:
    """Bytes of the regular files under the folder open at `fd`, links not followed."""
    total = 0
    for _top, _dirs, files, dir_fd in os.fwalk(".", dir_fd=fd):
        for name in files:
            with contextlib.suppress(OSError):
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                if stat.S_ISREG(st.st_mode):
                    total += st.st_size
    return total


def stored_bytes(root: Path) -> int:
    """The size of the cache at `root` without creating or locking anything (`curate log`);
    0 when there is none (or it is a link, never followed)."""
    try:
        with Folder.open(root) as folder:
            return tree_bytes(folder.fd)
    except OSError:
        return 0

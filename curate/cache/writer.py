"""An entry being written: a private folder inside the cache root, invisible until commit.

The caller writes its files through `open(name)` (hashed as they are written, so commit
need not read them back) or at `path(name)`; `commit` checksums each (a file written
through `open` by what was hashed, any other by reading it), writes meta.json, gives
everything the recipe's modes and renames the folder to `<key[:2]>/<key>` in one
rename(2). Killed before the rename, only a `.tmp-<pid>-<hex>` folder remains, which
nobody reads and the next sweep removes; killed after, the entry is complete. While being
written the folder is 0700 (the files hold text from before the PII stage); at commit it
gets the recipe's dir mode.

What the recipe's `output.fsync` makes durable before the rename is meta.json and the
folder's names, not the entry's data files nor the rename itself. A SIGKILL needs no fsync
(the page cache survives the process). A power loss can lose an entry's data or its
rename, and either way the entry is recomputed, never trusted: a data file that lost bytes
fails the size and xxh3_128 check every `get` makes (and the damaged entry is removed), a
lost rename leaves a temp folder the next sweep removes. meta.json stays synced because
an entry whose meta.json came back torn could not be proved ours and would block its key
for good (`curate.cache.meta.read_meta`). Syncing the data files cost a cold run of a
300 MB corpus about 656 MB of writeback on the workers' critical path (561 MB of entries:
4-4.7 s of wall with every file synced, 1 s without).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

import xxhash

from curate.cache.meta import file_digest, meta_text
from curate.cache.names import META, check_name
from curate.phases import mark

if TYPE_CHECKING:
    from curate.cache.store import StageCache


def temp_name() -> str:
    """A name matching `names.TEMP`: unique per process and call."""
    return f".tmp-{os.getpid()}-{secrets.token_hex(6)}"


class EntryWriter:
    """Files for one key, committed at once or not at all (`with` aborts when not committed)."""

    def __init__(self, cache: StageCache, key: str) -> None:
        self.key = key
        self._cache = cache
        self._name = temp_name()
        self._folder = cache.root().folder(self._name, 0o700)
        self._path = cache.spec.root / self._name
        self._open = True
        self.landed: bool | None = None  # after commit: False when another writer's won
        self._hashed: dict[str, HashingFile] = {}  # files written through `open`

    def __enter__(self) -> EntryWriter:
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._open:
            self.abort()

    def path(self, name: str) -> Path:
        """Where to write the file `name` of the entry (a plain name: no folders)."""
        return self._path / check_name(name)

    def open(self, name: str) -> HashingFile:
        """The file `name` of the entry, created for writing in the entry's private folder
        through the descriptor held on it (a link swapped in for a folder on the way to the
        cache is never followed), hashed as it is written."""
        fd = self._folder.open_file(check_name(name), os.O_WRONLY, mode=self._cache.spec.file_mode)
        self._hashed[name] = sink = HashingFile(fd)
        return sink

    def commit(self, meta: dict[str, Any]) -> bool:
        """Make the entry visible under its key with `meta`; False when an entry was already
        committed there (by another run): that one stays, ours is dropped."""
        if not self._open:
            raise RuntimeError("this entry was already committed or aborted")
        spec = self._cache.spec
        try:
            files = self._checksummed()
            self._folder.write_atomic(META, meta_text(self.key, files, meta), spec.file_mode,
                                      fsync=spec.fsync)  # fmt: skip
            self._folder.chmod(spec.dir_mode)
            if spec.fsync:
                self._folder.fsync()
            mark("cache_write")  # crash tests kill here: complete, but not yet visible
            root = self._cache.root()
            with root.folder(self.key[:2], spec.dir_mode) as shard:
                try:
                    root.rename(self._name, shard, self.key)
                    self.landed = True
                except OSError as exc:  # ENOTEMPTY: another writer committed it first
                    if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                        raise
                    self.landed = False
            mark("cache_commit")
        except BaseException:
            self.abort()
            raise
        self._open = False
        self._folder.close()
        if not self.landed:
            self._remove()
        return self.landed

    def abort(self) -> None:
        """Drop everything written (nothing of it was ever visible)."""
        self._open = False
        self._folder.close()
        self._remove()

    def _remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._cache.root().remove_tree(self._name)

    def _checksummed(self) -> dict[str, dict[str, Any]]:
        """Each file's size and xxh3_128, its mode set to the recipe's (it may have been
        created under any umask, by a library that writes through its own path); not synced
        (see the module's docstring)."""
        spec = self._cache.spec
        files: dict[str, dict[str, Any]] = {}
        for entry in sorted(self._folder.scandir(), key=lambda e: e.name):
            name = check_name(entry.name)
            fd = self._folder.open_file(name, os.O_RDONLY | os.O_NONBLOCK)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise ValueError(f"stage cache entry file {name!r} is not a regular file")
                os.fchmod(fd, spec.file_mode)
                sink = self._hashed.get(name)
                if sink is not None and sink.closed and sink.size == os.fstat(fd).st_size:
                    size, digest = sink.size, sink.hash.hexdigest()  # what went into it
                else:  # written at `path(name)`, or not closed: read back
                    size, digest = file_digest(fd)
            finally:
                os.close(fd)
            files[name] = {"size": size, "xxh3_128": digest}
        return files


class HashingFile:
    """A file being written into an entry, with the xxh3_128 and the count of the bytes
    written so far: commit takes the file's checksum from it instead of reading the file
    back (one pass over the bytes instead of two; the entries of a 300 MB corpus's cold run
    hold 656 MB). Python's buffered writer writes every byte it is given or raises, so
    what was hashed is what the file holds once closed."""

    def __init__(self, fd: int) -> None:
        self._file = os.fdopen(fd, "wb")
        self.hash = xxhash.xxh3_128()
        self.size = 0

    def write(self, data: bytes | memoryview) -> int:
        self.hash.update(data)
        self.size += memoryview(data).nbytes
        return self._file.write(data)

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        self._file.flush()

    def writable(self) -> bool:
        return True

    @property
    def closed(self) -> bool:
        return self._file.closed

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> HashingFile:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

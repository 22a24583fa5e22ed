"""The sha256 of a file on disk: one reader for every file curate hashes.

`curate verify` must read every byte each time it is asked (`sha256_file`); a tokenizer
file is hashed on every run's fingerprint, so it is remembered per path, size and mtime
(`remembered_sha256`) to keep a no-op run cheap.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

CHUNK = 8 << 20
_REMEMBERED: dict[tuple[str, int, int], str] = {}


def sha256_file(path: str | os.PathLike[str]) -> str:
    """The hex sha256 of every byte of the file, read now."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def sha256_fd(fd: int) -> str:
    """The sha256 of the file open at `fd`, read with pread (its offset left alone): a
    file opened through a held folder descriptor, never by a path that could be swapped."""
    h = hashlib.sha256()
    offset = 0
    while chunk := os.pread(fd, CHUNK, offset):
        h.update(chunk)
        offset += len(chunk)
    return h.hexdigest()


def remembered_sha256(path: Path) -> str:
    """`sha256_file`, remembered per (path, size, mtime) in this process."""
    st = os.stat(path)
    key = (str(path), st.st_size, st.st_mtime_ns)
    digest = _REMEMBERED.get(key)
    if digest is None:
        _REMEMBERED[key] = digest = sha256_file(path)
    return digest

"""Paths read from files stay inside the folder those files belong to.

A manifest, a `state.json`, a `LATEST` or an `.index` entry is data: whoever can write
it (another user of a shared output root, a copied or crafted version) chooses the
paths curate then reads, hashes, links or serves. Each such path goes through `inside`,
which refuses what would leave the folder: an absolute path, a `..` part, or a
symbolic link on the way that leads out. Versions that share bytes do so by hard
links, which stay inside the folder by construction.

The check is lexical plus one `lstat` per path component (a symlink found on the
way costs one `realpath`), so checking every shard of a large version stays cheap.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from curate.errors import CurateError


def escape(folder: Path | str, relative: object) -> str | None:
    """Why `folder / relative` would leave `folder`, or None when it stays inside."""
    if not isinstance(relative, str) or not relative.strip():
        return "is not a relative path"
    if "\0" in relative:
        return "holds a NUL character"
    if relative.startswith("/"):
        return "is an absolute path"
    parts = relative.split("/")
    if ".." in parts:
        return "has a '..' part"
    base = os.fspath(folder)
    current = base
    for part in parts:  # strings, not Path objects: this runs once per shard of a version
        if part in ("", "."):
            continue
        current = os.path.join(current, part)
        try:
            mode = os.lstat(current).st_mode
        except OSError:  # missing (or unreadable): the caller reports it as such
            return None
        if stat.S_ISLNK(mode):
            real, root = os.path.realpath(os.path.join(base, relative)), os.path.realpath(base)
            if real != root and not real.startswith(root.rstrip(os.sep) + os.sep):
                return "is or passes through a symbolic link leading out of the folder"
            return None
    return None


def inside(folder: Path | str, relative: object, *, source: Path | str, field: str) -> Path:
    """`folder / relative`, refused with a CurateError naming `source` (the file the path was
    read from) and `field` (where in it) when the path would leave `folder`."""
    problem = escape(folder, relative)
    if problem is not None:
        raise CurateError(f"{source}: {field} {relative!r} leads outside {folder} ({problem})")
    return Path(folder, str(relative))

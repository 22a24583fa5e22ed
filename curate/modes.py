"""Folders and files curate creates get exactly the recipe's modes, whatever the umask.

`mkdir(mode)` and `open(O_CREAT, mode)` only take bits away from the process umask:
at umask 000 a default mode is world-writable, at umask 077 a root shared by a group
(`dir_mode: "0770"`) locks the group out. So every folder and file curate creates
outside a build's own umask goes through here and is chmod-ed to the mode asked for.
A reader (`curate.open`) and `curate gc`, which have no recipe, give what they add (their
locks) the dataset folder's own modes.
"""

from __future__ import annotations

import os
from pathlib import Path


def make_dirs(path: Path, mode: int) -> None:
    """`path` and any missing parents, each created one with exactly `mode`."""
    missing = []
    current = Path(path)
    while not current.is_dir():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except FileExistsError:  # another process made it (or it is a file: mkdir says)
            if not folder.is_dir():
                raise
            continue
        # through the folder just made, not its name: a link swapped in meanwhile stays as is
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            os.fchmod(fd, mode)
        finally:
            os.close(fd)


def open_created(path: Path, mode: int, flags: int = os.O_RDWR) -> int:
    """A descriptor on `path`, created with exactly `mode` if it did not exist (an existing
    file keeps its mode: it may be another user's). Never through a symbolic link (ELOOP):
    curate's locks are truncated and written, which must not reach a file a link leads to."""
    flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        return os.open(path, flags)
    os.fchmod(fd, mode)
    return fd

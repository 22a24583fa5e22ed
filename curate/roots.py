"""Which folders curate may use as an output root: ones it made, or ones holding only datasets.

A recipe's `output.root` is a path anyone can mistype or point at a home folder, a
project checkout or `/data`; what curate then writes (and what `curate gc` later
removes) must not land among someone's files. So curate marks each root it creates with
a `.curate-root` file. An existing root without the mark is *adopted* (marked) only when
every entry in it is a curate dataset folder: an empty folder, or roots made by curate
versions that did not mark them. Anything else is refused before a byte is written,
naming the root and the first entry that is not a dataset.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from curate.errors import CurateError
from curate.modes import make_dirs, open_created
from curate.sealed import VERSION_NAME

MARK = ".curate-root"
_TEXT = "curate output root: curate writes datasets here (see README, 'Staying in the building')\n"
# Everything else curate puts in a dataset folder: bookkeeping, locks, leftovers.
_OURS = re.compile(
    r"^(LATEST|\.index|\.locks|\.cache|\.publish\.lock|\.gc\.lock|\.lock-[0-9a-f]+"
    r"|\.staging-[0-9a-f]+|\.deleting-.+|\..+\.tmp-\d+)$"
)


def claim(root: Path, dir_mode: int, file_mode: int) -> None:
    """Make `root` a root curate may write datasets into, or raise a CurateError saying why not.

    Costs one `lstat` for a marked root (every build and every no-op run that updates the
    content-hash cache passes here).
    """
    mark = root / MARK
    try:
        if stat.S_ISREG(os.lstat(mark).st_mode):
            return
    except OSError:
        pass
    if not root.exists():
        make_dirs(root, dir_mode)  # an OSError here is the store's "cannot create" message
    elif root.is_dir():
        stranger = _first_stranger(root)
        if stranger is not None:
            raise CurateError(
                f"{root} is not a curate output root: {stranger!r} in it is not a curate "
                f"dataset. curate writes only into a root it created (marked by {MARK}) or "
                "one holding nothing but its datasets; name a new or empty folder",
                at=("output", "root"),
            )
    fd = open_created(mark, file_mode, os.O_WRONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(_TEXT)


def _first_stranger(root: Path) -> str | None:
    """The first entry (by name) of an unmarked root that is not a curate dataset folder."""
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if entry.name == MARK:  # another run's claim, made since this one looked: not a stranger
            continue
        if not _is_dataset(Path(entry.path)):
            return entry.name
    return None


def _is_dataset(path: Path) -> bool:
    """A real folder (not a link) holding only what curate puts in a dataset folder: its
    bookkeeping, and versions (folders named v<digits> with a manifest.json)."""
    if path.is_symlink() or not path.is_dir():
        return False
    try:
        names = os.listdir(path)
    except OSError:
        return False
    return all(
        _OURS.match(name)
        or (VERSION_NAME.match(name) and (path / name / "manifest.json").is_file())
        for name in names
    )

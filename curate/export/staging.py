"""An export appears by one rename of a complete folder, or not at all.

The staging folder sits beside the target (same file system, so the rename is atomic) and
is hidden (`.NAME.export-...`); a failure or a refusal removes it, so nothing half-written
is ever visible under the name the user asked for.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from curate.errors import CurateError


def check_target(out: Path) -> Path:
    """The absolute target, refused when it exists (an export is never written over) or its
    parent folder does not."""
    out = Path(os.path.abspath(out))
    if out.exists() or out.is_symlink():
        raise CurateError(
            f"{out} already exists: an export is never written over an existing folder; "
            "name a new one (or remove it)"
        )
    if not out.parent.is_dir():
        raise CurateError(f"{out.parent} does not exist: create the folder the export goes in")
    return out


@contextmanager
def staged(out: Path) -> Iterator[Path]:
    """A fresh staging folder for `out`, renamed to `out` when the block completes and removed
    when it raises."""
    out = check_target(out)
    staging = out.parent / f".{out.name}.export-{os.getpid()}-{secrets.token_hex(4)}"
    staging.mkdir()
    try:
        yield staging
        _fsync_tree(staging)
        if out.exists() or out.is_symlink():  # appeared while we wrote
            check_target(out)
        os.rename(staging, out)
        _fsync_dir(out.parent)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(folder: Path) -> None:
    """Folders only: every file was fsynced by its writer as it was closed."""
    for path in sorted((p for p in folder.rglob("*") if p.is_dir()), reverse=True):
        _fsync_dir(path)
    _fsync_dir(folder)

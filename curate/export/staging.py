"""An export appears by one rename of a complete folder, or not at all.

The staging folder sits beside the target (same file system, so the rename is atomic) and
is hidden (`.NAME.export-PID-...`); a failure or a refusal removes it, so nothing
half-written is ever visible under the name the user asked for. A process killed mid-export
(SIGKILL, power cut) leaves its staging folder behind; the next export to the same name
removes those whose process is gone, and only those.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from curate import phases
from curate.errors import CurateError

_STAGING = re.compile(r"\.(?P<name>.+)\.export-(?P<pid>[0-9]+)-[0-9a-f]{8}")


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
    _remove_dead(out)
    staging = out.parent / f".{out.name}.export-{os.getpid()}-{secrets.token_hex(4)}"
    staging.mkdir()
    try:
        yield staging
        _fsync_tree(staging)
        phases.mark("export_publish")
        if out.exists() or out.is_symlink():  # appeared while we wrote
            check_target(out)
        os.rename(staging, out)
        _fsync_dir(out.parent)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _remove_dead(out: Path) -> None:
    """Staging folders of exports to `out` whose process is no longer alive."""
    for entry in out.parent.iterdir():
        found = _STAGING.fullmatch(entry.name)
        if found is None or found["name"] != out.name or _alive(int(found["pid"])):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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

"""Inputs must not change while a run reads them: stat identities taken and checked again.

An input truncated while a run read it used to give a version with a third of its
records, exit 0, and a manifest claiming the whole file's size and hash. So each input's
stat (size, mtime, ctime, inode, device) is taken when the run discovers it, and checked
again when each of its partitions has been read (in the worker), around the hashing of its
bytes, and in the driver just before publishing. Any difference fails the run with one
line naming the file; nothing is published, and what was staged from the file as it was
is not reused by the next run (`drop_stale_staging`).

ctime is in the identity because a rewrite that restores size and mtime (`cp -p`,
`touch -d`) still moves it; inode and device because a file renamed over the input is
another file, even with the same bytes. A folder input's identity is its members' total
size, latest mtime and ctime, with the folder's own inode and device.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from curate.errors import CurateError
from curate.io import folders
from curate.io.inputs import InputFile

if TYPE_CHECKING:
    from curate.staging.names import Staging
    from curate.staging.record import PartitionRecord

log = logging.getLogger(__name__)

Identity = tuple[int, int, int, int, int]
"""(size, mtime_ns, ctime_ns, inode, device)."""

FOLDER_FORMATS = ("text_folder", "hf_disk")


class InputChanged(CurateError):
    """An input changed between the run's discovery of it and its publishing."""


def discovered(inp: InputFile) -> Identity:
    """The identity the run discovered the input with."""
    return (inp.size, inp.mtime_ns, inp.ctime_ns, inp.inode, inp.device)


def current(inp: InputFile) -> Identity | None:
    """The input's identity now, or None when it is gone or cannot be listed."""
    try:
        st = os.stat(inp.path)
        if inp.format not in FOLDER_FORMATS:
            return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
        found = folders.list_folder(inp.path, inp.format)
    except (OSError, CurateError):
        return None
    return (found.size, found.mtime_ns, found.ctime_ns, st.st_ino, st.st_dev)


def check(inp: InputFile, seen: Identity | None = None) -> Identity:
    """The input's identity, when it is still the one discovered (or `seen`); else fail."""
    want = seen if seen is not None else discovered(inp)
    now = current(inp)
    if now != want:
        raise InputChanged(
            f"{inp.label} changed while the run read it ({_difference(want, now)}); "
            "nothing was published; run again once it is stable"
        )
    return now


def check_all(files: Iterable[InputFile]) -> None:
    """Every input still as discovered: the driver's last look before publishing."""
    for inp in files:
        check(inp)


def check_records(files: list[InputFile], first_pass: list[PartitionRecord]) -> None:
    """Every first-pass partition record was read from its input as this run discovered it
    (a record staged by an earlier run from the input as it was then says otherwise)."""
    by_name = {f.name: f for f in files}
    for record in first_pass:
        inp = by_name.get(record.input)
        if inp is None:
            continue
        staged = record.input_stat
        if staged is None or tuple(staged) != discovered(inp):
            want = cast(Identity, tuple(staged)) if staged is not None else None
            raise InputChanged(
                f"{inp.label} changed while the run read it "
                f"({_difference(want, discovered(inp))}); nothing was published; "
                "run again once it is stable"
            )


def hash_unchanged(inp: InputFile, digest: Any) -> str:
    """`digest(path)`, checked to be of the bytes discovered: the identity is the same
    before and after hashing, so the manifest's hash is of what the run read."""
    check(inp)
    value: str = digest(Path(inp.path))
    check(inp)
    return value


def drop_stale_staging(
    staging: Staging, files: list[InputFile], remove: Callable[[], None]
) -> bool:
    """Remove the staging folder when anything in it was read from an input that has changed
    since (its first-pass records and checkpoints carry the identity they were read with);
    return whether it was removed. With `input_identity: content` a file rewritten with the
    same bytes keeps the fingerprint, so its staging would otherwise be resumed. `remove`
    removes it (the store: through the dataset folder it holds open, never through a link)."""
    by_name = {f.name: discovered(f) for f in files}
    for path in staging.first_pass_records():
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # an unreadable record is not reused anyway
        record = data.get("record", data)  # a checkpoint holds the record so far
        staged = record.get("input_stat")
        if staged is None or tuple(staged) != by_name.get(record.get("input")):
            log.info("input %s changed since %s was staged: reading again", record.get("input"),
                     path.name)  # fmt: skip
            remove()
            return True
    return False


def _difference(was: Identity | None, now: Identity | None) -> str:
    if now is None:
        return "it is gone or cannot be read"
    if was is None:
        return "staged by a run that did not record it"
    if was[0] != now[0]:
        return f"size {was[0]} -> {now[0]}"
    if was[3:] != now[3:]:
        return "another file took its name"
    if was[1] != now[1]:
        return "its modification time changed"
    return "it was rewritten or its status changed (ctime)"

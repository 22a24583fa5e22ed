"""Unchanged files shared with earlier versions through hard links, decided at publish.

With the stage cache, a rerun after new inputs writes the unchanged partitions' shards (and
their key-fixed groups) byte for byte as the previous version holds them. Keeping a second
copy of each in every version makes a weekly addition cost a full dataset on disk; a hard
link costs nothing, and keeps every version a complete folder of its own (no shared store:
each path a version lists stays inside it, each version verifies and is removed on its own,
and a file's bytes are freed only with its last link).

A hard link shares one inode, so whatever happens to one version's file happens to all:
- the earlier file is trusted only after reading it again (sha256, as its manifest and the
  new version's agree): a flipped byte keeps the new version's copy instead of spreading;
- it must already have the owner, group and sealed mode the new file gets (`Store.publish`
  makes files `file_mode` minus write bits), so sealing the new version changes nothing in
  the earlier one, and no file of another user or mode is adopted;
- the link is made at a temporary name beside the new file and renamed over it (a reader of
  the staging folder sees the copy or the link, never neither), every name resolved through
  descriptors with O_NOFOLLOW (`curate.dirfd`), only inside the two version folders;
- any refusal (mismatch, EPERM from protected hard links, EXDEV, EMLINK, ...) keeps the copy
  and logs one line saying why. Nothing later in publish opens a shard for writing.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from curate.digests import sha256_fd
from curate.dirfd import Folder
from curate.manifest import FileRecord
from curate.phases import mark
from curate.staging.names import OUT
from curate.store import Store

log = logging.getLogger(__name__)

LOOK_BACK = 4  # LATEST and the newest versions before it: where a rerun's unchanged files are
KINDS = ("shards", "rejected", "quarantine", "lineage")
_READ = os.O_RDONLY | os.O_NONBLOCK  # Folder.open_file adds O_NOFOLLOW
_TEMP = re.compile(r"^\..+\.link-\d+$")
_Key = tuple[int, int, int, int]  # an inode as last seen: dev, ino, size, ctime


@dataclass
class Shared:
    """What publishing shared: bytes linked from earlier versions, bytes kept as copies."""

    linked: list[str] = field(default_factory=list)
    linked_bytes: int = 0
    copied: dict[str, str] = field(default_factory=dict)  # path -> why it was not linked


def share_unchanged(store: Store, staging: Folder, records: list[FileRecord]) -> Shared:
    """Replace each of `records` (files of the version about to be published from the
    staging folder's `out`) with a hard link to the same file of an earlier sealed version,
    where one is identical."""
    shared = Shared()
    earlier = _earlier_files(store)
    if not earlier:
        return shared
    with staging.folder(OUT) as out:
        _share_all(store, out, records, shared, earlier)
    if shared.linked:
        log.info("linked %d unchanged files from earlier versions", len(shared.linked))
    return shared


def _share_all(
    store: Store,
    out: Folder,
    records: list[FileRecord],
    shared: Shared,
    earlier: list[tuple[str, dict[str, tuple[int, str]]]],
) -> None:
    sealed_mode = store.file_mode & ~0o222
    hashed: dict[_Key, str] = {}
    _drop_stale_temps(out, records)
    for record in records:
        listed = (record.bytes, record.sha256)
        candidates = [v for v, files in earlier if files.get(record.path) == listed]
        if not candidates:
            continue
        why = _share_one(store, out, record, candidates, sealed_mode, hashed)
        if why is None:
            shared.linked.append(record.path)
            shared.linked_bytes += record.bytes
        else:
            shared.copied[record.path] = why
            log.info("%s: kept a copy, not linked to an earlier version: %s", record.path, why)


def _earlier_files(store: Store) -> list[tuple[str, dict[str, tuple[int, str]]]]:
    """(version, {path: (bytes, sha256)}) of LATEST and the newest sealed versions, newest
    first, as their manifests list them (a version not sealed is not read)."""
    names = store.versions()
    latest = store.latest()
    order = ([latest] if latest in names else []) + [v for v in reversed(names) if v != latest]
    found = []
    for name in order[:LOOK_BACK]:
        manifest, problem = store.sealed(name)
        if manifest is None:
            log.debug("%s not searched for files to share: %s", name, problem)
            continue
        found.append((name, _listed(manifest)))
    return found


def _listed(manifest: dict[str, Any]) -> dict[str, tuple[int, str]]:
    files = {}
    for kind in KINDS:
        entries = manifest.get(kind)
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, dict):
                continue
            path, size, digest = entry.get("path"), entry.get("bytes"), entry.get("sha256")
            if isinstance(path, str) and isinstance(size, int) and isinstance(digest, str):
                files[path] = (size, digest)
    return files


def _parts(path: str) -> list[str] | None:
    """A listed path's names, or None when it is not a plain relative path (`..`, `/x`)."""
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return None
    return parts


@contextlib.contextmanager
def _folder_of(top: Folder, parts: list[str]) -> Iterator[Folder]:
    """The folder holding a file, reached from `top` one name at a time, never via a link."""
    with contextlib.ExitStack() as opened:
        folder = top
        for name in parts:
            folder = opened.enter_context(folder.folder(name))
        yield folder


def _share_one(
    store: Store,
    out: Folder,
    record: FileRecord,
    candidates: list[str],
    sealed_mode: int,
    hashed: dict[_Key, str],
) -> str | None:
    """Link `record` to the first candidate version's file that passes; None, or why not."""
    parts = _parts(record.path)
    if parts is None:
        return "not a plain relative path"
    why: str | None = "no earlier version holds it"
    try:
        with _folder_of(out, parts[:-1]) as target:
            new = target.lstat(parts[-1])
            for version in candidates:
                try:
                    with store.dataset().folder(version) as top, _folder_of(top, parts[:-1]) as src:
                        why = _link(src, target, parts[-1], record, new, sealed_mode, hashed)
                except OSError as exc:
                    why = f"{version}/{record.path} cannot be opened ({_said(exc)})"
                else:
                    why = None if why is None else f"{version}/{record.path} {why}"
                if why is None:
                    return None
    except OSError as exc:
        return f"the new file cannot be reached ({_said(exc)})"
    return why


def _link(
    src: Folder,
    target: Folder,
    name: str,
    record: FileRecord,
    new: os.stat_result,
    sealed_mode: int,
    hashed: dict[_Key, str],
) -> str | None:
    fd = src.open_file(name, _READ)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "is not a regular file"
        if st.st_size != record.bytes:
            return f"has {st.st_size} bytes, not {record.bytes}"
        if (st.st_uid, st.st_gid) != (new.st_uid, new.st_gid):
            return (
                f"belongs to {st.st_uid}:{st.st_gid}, the new version's files to "
                f"{new.st_uid}:{new.st_gid}"
            )
        if (st.st_dev, st.st_ino) == (new.st_dev, new.st_ino):
            return None  # linked already (a run resumed after sharing)
        if stat.S_IMODE(st.st_mode) != sealed_mode:
            return (
                f"has mode {stat.S_IMODE(st.st_mode):04o}, the new version's files get "
                f"{sealed_mode:04o}"
            )
        temp = f".{name}.link-{os.getpid()}"
        try:
            os.link(name, temp, src_dir_fd=src.fd, dst_dir_fd=target.fd, follow_symlinks=False)
        except OSError as exc:  # EPERM (protected hard links), EXDEV, EMLINK, ...
            return f"cannot be linked ({_said(exc)})"
        mark("share")  # a crash test kills here: a link at a temporary name, none published
        try:
            made = target.lstat(temp)
            if (made.st_dev, made.st_ino) != (st.st_dev, st.st_ino):
                return "was replaced while it was linked"
            key = (st.st_dev, st.st_ino, st.st_size, st.st_ctime_ns)
            digest = hashed.get(key) or sha256_fd(fd)
            hashed[key] = digest
            if digest != record.sha256:
                return "does not hold the bytes its manifest lists (damaged): not spread"
            os.replace(temp, name, src_dir_fd=target.fd, dst_dir_fd=target.fd)
            return None
        finally:
            with contextlib.suppress(FileNotFoundError):
                target.unlink(temp)
    finally:
        os.close(fd)


def _drop_stale_temps(out: Folder, records: list[FileRecord]) -> None:
    """A link left at a temporary name by a run killed while sharing: never published."""
    folders = {tuple(parts[:-1]) for r in records if (parts := _parts(r.path)) is not None}
    for names in sorted(folders):
        try:
            with _folder_of(out, list(names)) as folder:
                for entry in folder.scandir():
                    if _TEMP.match(entry.name) and not entry.is_dir(follow_symlinks=False):
                        with contextlib.suppress(FileNotFoundError):
                            folder.unlink(entry.name)
        except OSError as exc:
            log.debug("%s not cleaned: %s", "/".join(names), exc)


def _said(exc: OSError) -> str:
    name = errno.errorcode.get(exc.errno or 0, "error")
    return f"{name}: {exc.strerror}" if exc.strerror else name

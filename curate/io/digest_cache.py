"""Partition digests of inputs read before, by file identity, kept in the dataset's `.cache`.

A partition's digest (`curate.io.partition_digest`) is taken by the worker that reads it
and lands in the pass-0 record and the manifest. Two things need it *before* reading: the
content fingerprint (`curate.same_content`: an input touched without changing must not
rebuild anything) and a stage cache's keys. So after a build each input's digests are kept
here (`.cache/digests.json`), with the stat identity it was read with (size, mtime, ctime,
inode, device: what the plan and content-hash caches trust too) and the partition size it
was planned for; a later run takes them as they are for a file whose identity and target
are unchanged, and plans and hashes anew (`file_digests`) only a file whose stat changed.

Parquet and Arrow partitions hash the column chunks and batch buffers they cover, not the
file's schema (a renamed column leaves them equal) nor an Arrow file's dictionaries; for
those formats an entry also holds the whole file's xxh3_128 (`FileDigests.whole`, the
manifest's `content_hash` of the input), so the content fingerprint sees every byte.

The cache is never a reason to fail and never trusted across a stat change: anything that
is not what this module writes (not JSON, another shape, another identity or target) is
ignored and the file hashed again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import xxhash

from curate.io.inputs import InputFile, stat_identity
from curate.io.partition_digest import partition_digest
from curate.io.partition_key import unit_of
from curate.io.partitions import plan_partitions

_PREFIX = "xxh3_128:"
WHOLE_FILE_UNITS = ("row_groups", "record_batches")
"""Units whose partition digests leave some of the file's bytes out (its schema, footer or
dictionaries): an entry of such a file carries the whole file's hash too."""


@dataclass(frozen=True)
class FileDigests:
    """What one input held, as a build read it: partition key -> digest, and for Parquet and
    Arrow files the whole file's xxh3_128 (else None)."""

    parts: dict[str, str]
    whole: str | None = None


def needs_whole(inp: InputFile) -> bool:
    return unit_of(inp.format) in WHOLE_FILE_UNITS


class DigestCache:
    """What a run read from `.cache/digests.json`, and what it kept this time."""

    def __init__(self, text: str | None) -> None:
        try:
            found = json.loads(text) if text else {}
        except (ValueError, RecursionError):
            found = {}
        self._old: dict[str, Any] = found if isinstance(found, dict) else {}
        self._new: dict[str, Any] = {}
        self._dropped = False

    def get(self, inp: InputFile, target: int) -> FileDigests | None:
        """The file's digests when it was read before with this stat identity and partition
        size, else None."""
        entry = self._new.get(inp.path) or self._old.get(inp.path)
        if not isinstance(entry, dict) or entry.get("target") != target:
            return None
        if any(entry.get(k) != v for k, v in stat_identity(inp).items()):
            return None
        parts, whole = entry.get("parts"), entry.get("whole")
        if not isinstance(parts, dict) or not parts or not all(map(_digest, parts.values())):
            return None
        if not all(isinstance(k, str) for k in parts):
            return None
        if needs_whole(inp) != (whole is not None) or (whole is not None and not _digest(whole)):
            return None
        return FileDigests(dict(parts), whole)

    def digests(self, inp: InputFile, target: int) -> dict[str, str] | None:
        """Partition key -> digest of the file, or None (`get`)."""
        found = self.get(inp, target)
        return None if found is None else found.parts

    def keep(self, inp: InputFile, target: int, found: FileDigests) -> None:
        """File the digests of `inp` as discovered (its identity, checked by the caller)."""
        self._new[inp.path] = {
            **stat_identity(inp),
            "target": target,
            "parts": dict(found.parts),
            "whole": found.whole,
        }

    def text(self) -> str | None:
        """The cache to write (the files kept this time, entries of others kept as they
        were), or None when nothing changed."""
        merged = {**self._old, **self._new}
        if merged == self._old and not self._dropped:
            return None
        return json.dumps(merged, sort_keys=True, separators=(",", ":"))

    def forget_others(self, paths: set[str]) -> None:
        """Drop entries of files not in `paths` (inputs no more), so the cache does not grow
        with every file a glob ever matched."""
        kept = {k: v for k, v in self._old.items() if k in paths}
        self._dropped = self._dropped or len(kept) != len(self._old)
        self._old = kept


def file_digests(inp: InputFile, target: int) -> FileDigests:
    """The file's partitions planned and hashed now, as a build's pass 0 would digest them
    (the caller checks the file's identity before and after: `curate.input_watch`)."""
    parts = {part.key: partition_digest(part) for part in plan_partitions([inp], target)}
    return FileDigests(parts, whole_hash(inp.path) if needs_whole(inp) else None)


def whole_hash(path: str) -> str:
    """xxh3_128 of a file's bytes (the manifest's `content_hash` of a single-file input)."""
    h = xxhash.xxh3_128()
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            h.update(chunk)
    return _PREFIX + h.hexdigest()


def _digest(value: object) -> bool:
    return isinstance(value, str) and value.startswith(_PREFIX) and len(value) == len(_PREFIX) + 32

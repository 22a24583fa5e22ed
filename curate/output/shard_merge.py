"""Merging small partitions' shards at publish, crash-safe and resumable.

`shard_groups` decides which partitions' shards merge; this writes each merged shard
beside its members (named by its first member's key, so the name is as stable as the
group), records what it wrote in the staging folder's `merges.json`, and only then
deletes the members. A run interrupted anywhere in between publishes the same bytes when
run again: without a complete `merges.json` every merged shard is written anew from
members that are all still there; with one, each merged shard it lists is checked against
its recorded size and sha256 before it is used, and members still present are deleted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa

from curate.digests import sha256_file
from curate.dirfd import write_atomic
from curate.errors import CurateError
from curate.output.shard_groups import Output, merge_groups
from curate.output.shards import write_batches
from curate.paths import escape
from curate.phases import mark

MERGES = "merges.json"

FileInfo = dict[str, Any]
"""A shard as a partition's completion record names it (`curate.staging.record.FileInfo`):
path relative to the staging folder, rows, bytes, sha256, and tokens/documents/split."""


def merged_shards(
    root: Path,
    parts: Sequence[tuple[str, list[FileInfo]]],
    shard_bytes: int,
    *,
    fsync: bool,
    file_mode: int,
    prefix: str = "group",
    record: str = MERGES,
) -> list[FileInfo]:
    """The final shards of a run in order, small partitions' shards merged by group.

    `parts` is each partition's key and final-pass shards, in input order; the shards of
    each split are grouped apart (a merged shard belongs to one split). Side outputs
    (rejected, quarantine) merge the same way, each kind and pass with its own `prefix`
    and `record` file.
    """
    plan = _plan(parts, shard_bytes, prefix)
    if not plan:
        return [s for _, shards in parts for s in shards]
    written = _recorded(root / record, root, plan)
    if written is None:
        written = _write_all(root, plan, fsync=fsync, file_mode=file_mode)
        merged = [
            {"shard": w, "members": [m["path"] for m in members]}
            for w, (_, members) in zip(written, plan, strict=True)
        ]
        text = json.dumps({"format": 1, "merged": merged}, indent=1, sort_keys=True) + "\n"
        write_atomic(root / record, text, mode=file_mode, fsync=fsync)
    for _, members in plan:
        mark("merge")
        for m in members:
            path = _resolve(root, m["path"])
            if path is not None:
                path.unlink(missing_ok=True)
    merged_by_first = {id(members[0]): w for w, (_, members) in zip(written, plan, strict=True)}
    gone = {id(m) for _, members in plan for m in members}
    final: list[FileInfo] = []
    for _, shards in parts:
        for s in shards:
            if id(s) in merged_by_first:
                final.append(merged_by_first[id(s)])
            elif id(s) not in gone:
                final.append(s)
    return final


def _plan(
    parts: Sequence[tuple[str, list[FileInfo]]], shard_bytes: int, prefix: str
) -> list[tuple[str, list[FileInfo]]]:
    """(target path, member shards) of every merged shard, in publish order."""
    splits = sorted({s.get("split") or "" for _, shards in parts for s in shards})
    plan: list[tuple[int, str, list[FileInfo]]] = []
    position = 0
    first_position: dict[int, int] = {}
    for _, shards in parts:
        for s in shards:
            first_position[id(s)] = position
            position += 1
    for split in splits:
        per_part = [(key, [s for s in shards if (s.get("split") or "") == split])
                    for key, shards in parts]  # fmt: skip
        outputs = [Output(key, sum(s["bytes"] for s in shards)) for key, shards in per_part]
        for group in merge_groups(outputs, shard_bytes):
            members = [s for i in group for s in per_part[i][1]]
            folder = Path(members[0]["path"]).parent.as_posix()
            target = f"{folder}/{prefix}-{per_part[group[0]][0]}.arrow"
            plan.append((first_position[id(members[0])], target, members))
    return [(target, members) for _, target, members in sorted(plan, key=lambda p: p[0])]


MERGE_THREADS = 4
"""Merged shards written side by side at most (`_write_all`)."""


def _write_all(
    root: Path, plan: list[tuple[str, list[FileInfo]]], *, fsync: bool, file_mode: int
) -> list[FileInfo]:
    """Every merged shard of the plan, in plan order, written side by side: publishing runs
    in the driver alone while the engine's workers idle, and a merge's time is Arrow's
    copy, sha256 and fdatasync, which all run without the GIL (two groups of a 300 MB
    run's ~100 MB each were written one after the other, on the wall time of every build
    that merges: a tokenizer-change rerun's 42 partitions merge into 2 shards). Each
    shard is written at a temporary name and renamed, as before; `merges.json` is written
    only once all are, so a crash at any point resumes as it did."""

    def one(target: str, members: list[FileInfo]) -> FileInfo:
        mark("merge")
        return _write(root, target, members, fsync=fsync, file_mode=file_mode)

    threads = min(len(plan), MERGE_THREADS)
    if threads < 2:
        return [one(target, members) for target, members in plan]
    with ThreadPoolExecutor(threads, thread_name_prefix="curate-merge") as pool:
        futures = [pool.submit(one, target, members) for target, members in plan]
        return [f.result() for f in futures]


def _write(
    root: Path, target: str, members: list[FileInfo], *, fsync: bool, file_mode: int
) -> FileInfo:
    path = _resolve(root, target)
    assert path is not None
    sources = []
    for m in members:
        source = _resolve(root, m["path"])
        if source is None or not source.is_file() or source.stat().st_size != m["bytes"]:
            raise CurateError(f"staged shard {m['path']} is missing or changed; run again")
        sources.append(source)
    tmp = path.with_name(f".{path.name}.tmp")
    with pa.memory_map(str(sources[0])) as first:
        schema = pa.ipc.open_stream(first).schema
    written = write_batches(tmp, schema, _batches(sources), fsync=fsync, file_mode=file_mode)
    size, sha = written.bytes, written.sha256
    os.replace(tmp, path)
    info: dict[str, Any] = {
        "path": target,
        "rows": sum(m["rows"] for m in members),
        "bytes": size,
        "sha256": sha,
    }
    for name in ("tokens", "documents"):
        if any(name in m for m in members):
            info[name] = sum(m.get(name, 0) for m in members)
    if members[0].get("split") is not None:
        info["split"] = members[0]["split"]
    return info


def _batches(sources: list[Path]) -> Iterator[pa.RecordBatch]:
    """The members' batches one after another, each file memory-mapped while it is read."""
    for source in sources:
        with pa.memory_map(str(source)) as mapped:
            yield from pa.ipc.open_stream(mapped)


def _recorded(
    path: Path, root: Path, plan: list[tuple[str, list[FileInfo]]]
) -> list[FileInfo] | None:
    """The merged shards a previous attempt recorded, when they match this plan and every
    one is intact (size and sha256 read now); else None, and they are written again."""
    try:
        record = json.loads(path.read_text())
        merged = record["merged"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    expected = [(t, [m["path"] for m in members]) for t, members in plan]
    try:
        found = [(e["shard"]["path"], e["members"]) for e in merged]
    except (KeyError, TypeError):
        return None
    if found != expected:
        return None
    for entry in merged:
        shard = entry["shard"]
        found_at = _resolve(root, shard["path"])
        if found_at is None or not found_at.is_file() or found_at.stat().st_size != shard["bytes"]:
            return None
        if sha256_file(found_at) != shard["sha256"]:
            return None
    return [e["shard"] for e in merged]


def _resolve(root: Path, name: str) -> Path | None:
    """The file a record names, or None when the name would lead out of the staging folder."""
    return None if escape(root, name) is not None else root / name

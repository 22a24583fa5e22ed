"""`curate forget --where`: what under the output root still holds a forgotten document, and
what curate knows of outside it.

Looked at by id (the ids the dataset's exclusions resolve to in the inputs as they are,
`curate.forget.resolve`, and the explicit ids): in each version, its shards (`id`, or a
packed row's `doc_ids`), lineage, rejected rows and examples (by `key`, the id's hash);
in the stage cache, every entry's Arrow files with an `id` column; quarantine listings (and
their cache entries) naming a forgotten quarantined record's line by file and offset
(`curate.forget.quarantined`); exports under the root
made from an affected version, and live mixtures drawing from one. Outside the root: the
inputs that hold them (curate never changes an input). Nothing read is printed but paths
and counts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from curate.errors import CurateError
from curate.excluded_rows import hits
from curate.export.record import EXPORT_MANIFEST
from curate.forget.exclusions import Exclusions
from curate.mixture_refs import drawn_from
from curate.stages.examples import key_of
from curate.store import Store


@dataclass(frozen=True)
class Holder:
    path: Path
    kind: str  # "version", "cache", "export", "mixture", "input"
    documents: int
    owner: str | None = None  # the version or cache entry the file belongs to

    def line(self) -> str:
        if self.kind in ("export", "mixture"):
            return f"{self.kind:8} {self.path}: draws from {self.owner or 'a version'} holding them"
        return f"{self.kind:8} {self.path}: {self.documents} forgotten document(s)"


def store_of(dataset: Path) -> Store:
    dataset = dataset.resolve()
    if (dataset / "manifest.json").is_file():  # a version folder: its dataset
        dataset = dataset.parent
    return Store(dataset.parent, dataset.name)


def forgotten_ids(store: Store) -> tuple[Exclusions, tuple[str, ...]]:
    exclusions = Exclusions.load(store)
    if not exclusions:
        raise CurateError(f"{store.path}: nothing was forgotten here (no .forget/exclusions.json)")
    ids = set(exclusions.ids)
    for entry in exclusions.resolved.values():
        ids.update(entry.get("ids", []))
    return exclusions, tuple(sorted(ids))


def forgotten_lines(exclusions: Exclusions) -> frozenset[tuple[str, int]]:
    """The forgotten quarantined records, by (input name, offset), as last resolved."""
    return frozenset((name, int(o)) for name, entry in exclusions.resolved.items()
                     for o in entry.get("quarantined", ()))  # fmt: skip


def holders(dataset: Path) -> list[Holder]:
    store = store_of(dataset)
    exclusions, ids = forgotten_ids(store)
    keys = tuple(sorted(key_of(i) for i in ids))
    lines = forgotten_lines(exclusions)
    found: list[Holder] = []
    for name in sorted(store.versions(), key=lambda n: int(n[1:]) if n[1:].isdigit() else 0):
        folder = store.path / name
        for path in sorted(p for p in folder.rglob("*.arrow") if p.is_file()):
            n = _count(path, ids, keys, lines)
            if n:
                found.append(Holder(path, "version", n, name))
    cache = store.path / ".cache" / "stages"
    if cache.is_dir() and not cache.is_symlink():
        for path in sorted(p for p in cache.rglob("*.arrow") if p.is_file()):
            n = _count(path, ids, keys, lines)
            if n:
                owner = path.parent.relative_to(cache).as_posix()
                found.append(Holder(path, "cache", n, owner))
    affected = {str((store.path / v).resolve()) for v in by_owner(found, "version")}
    for v in list(by_owner(found, "version")):
        for mixture in drawn_from(store.path / v):
            found.append(Holder(mixture, "mixture", 0, v))
    for export in _exports(store.root, affected):
        found.append(Holder(export, "export", 0))
    for name, entry in sorted(exclusions.resolved.items()):
        n = len(entry.get("ids", ())) + len(entry.get("quarantined", ()))
        if n and os.path.exists(entry.get("path", "")):
            found.append(Holder(Path(entry["path"]), "input", n, name))
    return found


def _exports(root: Path, affected: set[str]) -> Iterator[Path]:
    """Export folders under the root whose `export.json` names an affected version (their
    token files are not searched: they were made from it, so they hold what it held)."""
    for record in sorted(root.rglob(EXPORT_MANIFEST)):
        try:
            source = json.loads(record.read_text())["source"]["path"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if str(Path(source).resolve()) in affected:
            yield record.parent


def _count(
    path: Path,
    ids: tuple[str, ...],
    keys: tuple[str, ...],
    lines: frozenset[tuple[str, int]] = frozenset(),
) -> int:
    table = _read(path)
    if table is None or not (ids or lines):
        return 0
    names = table.schema.names
    if {"file", "offset", "reason"} <= set(names):  # a quarantine listing (or its cache entry)
        where = zip(table.column("file").to_pylist(), table.column("offset").to_pylist(),
                    strict=True)  # fmt: skip
        return sum((f, o) in lines for f, o in where)
    if not ids:
        return 0
    found: set[str] = set()  # distinct documents (a packed one may span rows)
    if "doc_ids" in names:
        flat = pa.table({"id": pc.list_flatten(table.column("doc_ids"))})
        found.update(flat.column("id").filter(hits(flat, ids)).to_pylist())
    elif "id" in names and "key" not in names:
        found.update(table.column("id").filter(hits(table, ids)).to_pylist())
    for column in ("key", "kept_key"):
        if column in names:
            found.update(table.column(column).filter(hits(table, keys, column)).to_pylist())
    return len(found)


def _read(path: Path) -> pa.Table | None:
    """An Arrow IPC stream or file, or None (not Arrow, or unreadable)."""
    for opener in (pa.ipc.open_stream, pa.ipc.open_file):
        try:
            with pa.memory_map(str(path)) as source:
                return opener(source).read_all()
        except (pa.ArrowInvalid, OSError):
            continue
    return None


def by_owner(found: list[Holder], kind: str) -> Iterator[str]:
    seen: list[str] = []
    for h in found:
        if h.kind == kind and h.owner is not None and h.owner not in seen:
            seen.append(h.owner)
    yield from seen

"""`curate forget --where`: what under the output root still holds a forgotten document, and
what curate knows of outside it.

Looked at by id: in each version, by the ids its inputs gave the forgotten documents as
they were when it was built (found by each input's content hash in its manifest among
those the exclusions kept: `Exclusions.ids_of`; an input changed or removed since does not
hide them), and the explicit ids: its shards (`id`, or a
packed row's `doc_ids`), lineage, rejected rows and examples (by `key`, the id's hash);
in the stage cache, by every id they ever had, every entry's Arrow files with an `id`
column; quarantine listings (and
their cache entries) naming a forgotten quarantined record's line by file and offset
(`curate.forget.quarantined`); exports under the root
made from an affected version, and live mixtures drawing from one. Outside the root, what
curate knows of: exports written elsewhere (the dataset folder notes where each export went:
`curate.export.record.remember`), `Version.to_dataset`'s views in curate's cache folder
(links into the version, and the caches `datasets` writes beside them), both also of a
version the purge removed (`purged`), and the inputs that hold them (curate never changes
an input). Nothing read is printed but paths and counts.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from curate.errors import CurateError
from curate.excluded_rows import hits
from curate.export.record import EXPORT_MANIFEST, known_exports
from curate.forget.exclusions import FOLDER, Exclusions
from curate.mixture_refs import drawn_from
from curate.stages.examples import key_of
from curate.store import Store


@dataclass(frozen=True)
class Holder:
    path: Path
    kind: str  # "version", "unknown", "cache", "export", "mixture", "view", "input"
    documents: int
    owner: str | None = None  # the version or cache entry the file belongs to
    outside: bool = False  # not under the output root: listed, never removed by the purge
    note: str = ""  # "unknown": the inputs whose ids are not known

    def line(self) -> str:
        if self.kind in ("export", "mixture"):
            text = f"{self.kind:8} {self.path}: draws from {self.owner or 'a version'} holding them"
        elif self.kind == "view":
            text = (f"view     {self.path}: Version.to_dataset's view of {self.owner}, holding "
                    "them (and the caches datasets wrote in it)")  # fmt: skip
        elif self.kind == "unknown":
            text = (f"version  {self.path}: may hold forgotten documents under ids not known: "
                    f"built from {self.note} as it was before it changed, and a document "
                    "forgotten since was not looked for there (the purge removes it)")  # fmt: skip
        else:
            text = f"{self.kind:8} {self.path}: {self.documents} forgotten document(s)"
        return text + (" [outside the root]" if self.outside else "")


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


def version_ids(
    exclusions: Exclusions, folder: Path
) -> tuple[tuple[str, ...], tuple[str, ...], frozenset[tuple[str, int]], list[str]]:
    """The ids the version in `folder` gives the forgotten documents, their keys (as examples
    name them), its forgotten quarantined lines, and the inputs where they are not known
    (`Exclusions.ids_of`)."""
    try:
        inputs = json.loads((folder / "manifest.json").read_text()).get("inputs") or []
    except (OSError, ValueError, AttributeError):
        inputs = []
    found, lines, unknown = exclusions.ids_of([i for i in inputs if isinstance(i, dict)])
    ids = tuple(sorted(found))
    return ids, tuple(sorted(key_of(i) for i in ids)), lines, unknown


def holders(dataset: Path) -> list[Holder]:
    store = store_of(dataset)
    exclusions, _ = forgotten_ids(store)
    found: list[Holder] = []
    for name in sorted(store.versions(), key=lambda n: int(n[1:]) if n[1:].isdigit() else 0):
        folder = store.path / name
        ids, keys, lines, unknown = version_ids(exclusions, folder)
        if unknown:  # built from an input as it was before it changed, not searched then
            found.append(Holder(folder, "unknown", 0, name, note=", ".join(unknown)))
        for path in sorted(p for p in folder.rglob("*.arrow") if p.is_file()):
            n = _count(path, ids, keys, lines)
            if n:
                found.append(Holder(path, "version", n, name))
    ids = tuple(sorted(exclusions.every_id()))  # an entry may be of any state of the inputs
    keys, lines = tuple(sorted(key_of(i) for i in ids)), exclusions.every_line()
    cache = store.path / ".cache" / "stages"
    if cache.is_dir() and not cache.is_symlink():
        for path in sorted(p for p in cache.rglob("*.arrow") if p.is_file()):
            n = _count(path, ids, keys, lines)
            if n:
                owner = path.parent.relative_to(cache).as_posix()
                found.append(Holder(path, "cache", n, owner))
    versions = list(dict.fromkeys([*by_owner(found, "version"), *by_owner(found, "unknown")]))
    affected = {str((store.path / v).resolve()): v for v in versions}
    for v in versions:
        for mixture in drawn_from(store.path / v):
            found.append(Holder(mixture, "mixture", 0, v))
    noted = purged(store)  # gone from the root, but what was made from them may not be
    affected |= noted
    for export, owner in _exports(store, affected, set(noted)):
        found.append(Holder(export, "export", 0, owner, outside=not _under(export, store.root)))
    for view, owner in _views(affected):
        found.append(Holder(view, "view", 0, owner, outside=not _under(view, store.root)))
    for name, entry in sorted(exclusions.resolved.items()):
        n = len(entry.get("ids", ())) + len(entry.get("quarantined", ()))
        if n and os.path.exists(entry.get("path", "")):
            found.append(Holder(Path(entry["path"]), "input", n, name))
    return found


PURGED = "purged.json"


def remember_purged(store: Store, removed: dict[str, str]) -> None:
    """Note the versions a purge removed or rewrote (real path -> how `--where` names it), so
    that `--where` still names the exports and views made from them before, outside the
    root."""
    notes = purged(store) | removed
    store.save_own(FOLDER, PURGED, json.dumps(notes, indent=1, sort_keys=True) + "\n")


def purged(store: Store) -> dict[str, str]:
    """Versions the purge removed or rewrote: real path -> "vN (purged)", or "vN (as it was
    before the purge rewrote it)"."""
    text = store.read_own(FOLDER, PURGED)
    try:
        notes = json.loads(text) if text else {}
        return {str(k): str(v) for k, v in notes.items()}
    except (ValueError, AttributeError):
        return {}


def _exports(store: Store, affected: dict[str, str], noted: set[str]) -> Iterator[tuple[Path, str]]:
    """Export folders whose `export.json` names an affected version: under the root, and
    wherever the export noted it went (`curate.export.record.remember`). Their files are not
    searched: they were made from it, so they hold what it held. One made from a rewritten
    version after the purge (the manifest it names is the one there now) holds nothing."""
    folders = {record.parent for record in store.root.rglob(EXPORT_MANIFEST)}
    folders.update(known_exports(store.path))
    for folder in sorted(folders):
        try:
            source = json.loads((folder / EXPORT_MANIFEST).read_text())["source"]
            path, made_from = str(Path(source["path"]).resolve()), source["manifest_sha256"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        owner = affected.get(path)
        if owner is not None and not (path in noted and _manifest_sha(path) == made_from):
            yield folder, owner


def _manifest_sha(version: str) -> str | None:
    try:
        return hashlib.sha256((Path(version) / "manifest.json").read_bytes()).hexdigest()
    except OSError:
        return None


def _views(affected: dict[str, str]) -> Iterator[tuple[Path, str]]:
    """`Version.to_dataset`'s views (`curate.views`, in curate's cache folder) of an affected
    version: known by where their links lead, which holds for a version since removed."""
    from curate.version import cache_dir

    views = cache_dir() / "views"
    if not views.is_dir():
        return
    prefixes = {path.rstrip(os.sep) + os.sep: owner for path, owner in affected.items()}
    for view in sorted(p for p in views.iterdir() if p.is_dir() and not p.is_symlink()):
        target = _first_link(view)
        owner = next((o for p, o in prefixes.items() if target and target.startswith(p)), None)
        if owner is not None:
            yield view, owner


def _first_link(folder: Path) -> str | None:
    for parent, dirs, files in os.walk(folder):
        for name in sorted(files + dirs):
            path = os.path.join(parent, name)
            if os.path.islink(path):
                return os.path.realpath(os.path.join(parent, os.readlink(path)))
    return None


def _under(path: Path, root: Path) -> bool:
    return Path(os.path.abspath(path)).is_relative_to(os.path.abspath(root))


def _count(
    path: Path,
    ids: tuple[str, ...],
    keys: tuple[str, ...],
    lines: frozenset[tuple[str, int]] = frozenset(),
) -> int:
    table = read_arrow(path)
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


def read_arrow(path: Path) -> pa.Table | None:
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

"""The ids a build drops: the dataset's exclusions as the ids its inputs give them now.

An input read when the ids were last resolved, and unchanged since (its stat identity:
path, size, mtime, ctime, inode, device, as the run's other caches trust it), keeps the ids
found then; any other (changed, or new) is read once by the driver and its
records whose text hash, or explicit id, is excluded are found by their current ids (and
its quarantined records whose line is forgotten, by their offsets). The resolved ids are
saved back, so the next build reads nothing again. Each state also keeps the input's
content hash (the manifest's `content_hash`), by which `--where` and the purge match a
version's inputs to it (`Exclusions.ids_of`): a file rewritten with its size and mtime kept
is another state, not the one a version was built from.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from curate.fingerprint import content_hash
from curate.forget.exclusions import Exclusions
from curate.forget.quarantined import Position, lines_of, raw_hash
from curate.forget.scan import documents
from curate.input_watch import hash_unchanged
from curate.io.batches import QuarantineRecord
from curate.io.inputs import InputFile, stat_identity
from curate.recipe import Recipe
from curate.store import Store

log = logging.getLogger(__name__)


def stat_of(f: InputFile) -> dict[str, Any]:
    return {"path": f.path, **stat_identity(f)}


def excluded_ids(
    exclusions: Exclusions, recipe: Recipe, files: Sequence[InputFile], store: Store | None
) -> frozenset[str]:
    if not exclusions:
        return frozenset()
    stale = [f for f in files if not _current(exclusions.resolved.get(f.name), f)]
    if stale:
        log.info("forget: reading %d changed input(s) for excluded documents", len(stale))
        found, lines = resolve(exclusions, recipe, stale)
        for f in stale:
            new = entry(f, found.get(f.name, set()), lines.get(f.name)) | {
                "of": exclusions.digest()  # searched for these (`Exclusions.ids_of`)
            }
            exclusions.resolved[f.name] = keeping(exclusions.resolved.get(f.name), new)
        if store is not None:
            exclusions.save(store)
    ids = set(exclusions.ids)
    for f in files:
        ids.update(exclusions.resolved[f.name]["ids"])
    return frozenset(ids)


def entry(f: InputFile, ids: set[str], lines: set[int] | None) -> dict[str, Any]:
    """What `resolved` holds of one input (read just now: hashing it again costs little)."""
    out = {**stat_of(f), "content_hash": hash_unchanged(f, content_hash), "ids": sorted(ids)}
    if lines:
        out["quarantined"] = sorted(lines)
    return out


def keeping(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """An input's new entry, keeping what was found in it as it was before (`earlier`,
    `Exclusions.ids_of`): versions built then hold the documents under those ids."""
    if old is None:
        return new
    states = [*old.get("earlier", ()), {k: v for k, v in old.items() if k != "earlier"}]
    earlier, seen = [], {_key(new)}
    for state in reversed(states):  # the latest of each input state, newest first
        key = _key(state)
        if key not in seen and (state.get("ids") or state.get("quarantined")):
            seen.add(key)
            earlier.append(state)
    return {**new, "earlier": earlier[::-1]} if earlier else new


def excluded_lines(exclusions: Exclusions, files: Sequence[InputFile]) -> frozenset[Position]:
    """The forgotten quarantined records, by (input name, offset), as `excluded_ids` resolved
    them (call it first)."""
    out = set()
    for f in files:
        for offset in exclusions.resolved.get(f.name, {}).get("quarantined", ()):
            out.add((f.name, int(offset)))
    return frozenset(out)


def resolve(
    exclusions: Exclusions, recipe: Recipe, files: Sequence[InputFile]
) -> tuple[dict[str, set[str]], dict[str, set[int]]]:
    """Input name -> ids of its excluded documents; and -> offsets of its forgotten
    quarantined lines."""
    hashes, ids = exclusions.hashes, exclusions.ids

    def wanted(name: str, doc_ids: list[str], texts: list[str], digests: list[str]) -> list[bool]:
        return [h in hashes or i in ids for i, h in zip(doc_ids, digests, strict=True)]

    lines: dict[str, set[int]] = {}

    def seen(f: InputFile, records: list[QuarantineRecord]) -> None:
        for r, raw in zip(records, lines_of(f, records), strict=True):
            if raw is not None and r.offset is not None and raw_hash(raw) in exclusions.quarantined:
                lines.setdefault(f.name, set()).add(r.offset)

    out: dict[str, set[str]] = {}
    quarantined = seen if exclusions.quarantined else None
    for name, doc_id, _ in documents(recipe, files, wanted, quarantined):
        out.setdefault(name, set()).add(doc_id)
    return out, lines


def _key(state: dict[str, Any]) -> Any:
    """What tells one state of an input from another: its content, where it was hashed."""
    return state.get("content_hash") or (state.get("size"), state.get("mtime_ns"))


def _current(entry: dict[str, Any] | None, f: InputFile) -> bool:
    return entry is not None and all(entry.get(k) == v for k, v in stat_of(f).items())

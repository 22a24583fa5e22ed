"""The ids a build drops: the dataset's exclusions as the ids its inputs give them now.

An input read when the ids were last resolved, and unchanged since (path, size, mtime),
keeps the ids found then; any other (changed, or new) is read once by the driver and its
records whose text hash, or explicit id, is excluded are found by their current ids. The
resolved ids are saved back, so the next build reads nothing again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from curate.forget.exclusions import Exclusions
from curate.forget.scan import documents
from curate.io.inputs import InputFile
from curate.recipe import Recipe
from curate.store import Store

log = logging.getLogger(__name__)


def stat_of(f: InputFile) -> dict[str, Any]:
    return {"path": f.path, "size": f.size, "mtime_ns": f.mtime_ns}


def excluded_ids(
    exclusions: Exclusions, recipe: Recipe, files: Sequence[InputFile], store: Store | None
) -> frozenset[str]:
    if not exclusions:
        return frozenset()
    stale = [f for f in files if not _current(exclusions.resolved.get(f.name), f)]
    if stale:
        log.info("forget: reading %d changed input(s) for excluded documents", len(stale))
        found = resolve(exclusions, recipe, stale)
        for f in stale:
            exclusions.resolved[f.name] = {**stat_of(f), "ids": sorted(found.get(f.name, ()))}
        if store is not None:
            exclusions.save(store)
    ids = set(exclusions.ids)
    for f in files:
        ids.update(exclusions.resolved[f.name]["ids"])
    return frozenset(ids)


def resolve(
    exclusions: Exclusions, recipe: Recipe, files: Sequence[InputFile]
) -> dict[str, set[str]]:
    """Input name -> ids of its excluded documents."""
    hashes, ids = exclusions.hashes, exclusions.ids

    def wanted(name: str, doc_ids: list[str], texts: list[str], digests: list[str]) -> list[bool]:
        return [h in hashes or i in ids for i, h in zip(doc_ids, digests, strict=True)]

    out: dict[str, set[str]] = {}
    for name, doc_id, _ in documents(recipe, files, wanted):
        out.setdefault(name, set()).add(doc_id)
    return out


def _current(entry: dict[str, Any] | None, f: InputFile) -> bool:
    return entry is not None and all(entry.get(k) == v for k, v in stat_of(f).items())

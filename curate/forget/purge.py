"""`curate gc --purge-forgotten`: no forgotten document left anywhere under the output root.

Every earlier version still holding one is rewritten without them (`curate.forget.rewrite`:
each file holding one written anew, packed partitions packed again from their token ids,
every other file hard-linked, the manifest and card updated, so it verifies), or, when it
cannot be (a mixture; a packed tail whose documents' partitions cannot be told), removed
as gc removes a version. Either way
its read lock is taken first: one a reader holds is refused by name, and the purge exits 1,
or with `--wait` waits for it; one a live mixture draws from is refused by name. A
removed version's shards that the newer versions share are hard links, so theirs stay. The
stage cache is freed when an entry holds one (entries are keyed by what they were computed
from, so none can be rewritten in place; the next run computes them again, keeping none for
a partition that holds a forgotten document). The latest version must hold none: `curate
forget` first. An export under the root made from a version holding one is refused by
name (it is the user's to delete or redo). What lies outside the root (exports written elsewhere,
`to_dataset` views) is named, not removed and not refused: the purge answers for the root;
the versions it removed or rewrote are noted (`where.remember_purged`) so `--where` keeps
naming what was made from them before.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from curate.errors import CurateError
from curate.forget.repack import CannotRepack
from curate.forget.rewrite import Rewrite, unfit
from curate.forget.where import (
    by_owner,
    forgotten_ids,
    holders,
    remember_purged,
    store_of,
    version_ids,
)
from curate.gc import (
    NOT_REWRITTEN,
    Action,
    NotRewritten,
    clear_cache,
    remove_named,
    rewrite_named,
)
from curate.store import Store

log = logging.getLogger(__name__)


READER = "kept, a reader holds it"


def purge(dataset: Path, dry_run: bool = False, wait: bool = False) -> list[Action]:
    """With `wait`, versions a reader holds are tried again every 2 s until none is."""
    while True:
        actions = _purge(dataset, dry_run)
        held = [a.path for a in actions if a.outcome == READER]
        if not wait or dry_run or not held:
            return actions
        log.info("purge: waiting for the readers of %s", ", ".join(held))
        time.sleep(2)


def _purge(dataset: Path, dry_run: bool) -> list[Action]:
    store = store_of(dataset)
    found = holders(store.path)
    unknown = list(by_owner(found, "unknown"))  # may hold one under an id not known: removed
    doomed = list(dict.fromkeys([*by_owner(found, "version"), *unknown]))
    latest = store.latest()
    if latest in doomed:
        raise CurateError(
            f"{store.path / latest} (LATEST) still holds forgotten documents: run curate forget "
            "first, so a version without them replaces it"
        )
    actions = [
        Action(str(h.path), f"kept, {h.kind} of a version holding them: delete it", refused=True)
        for h in found
        if h.kind == "export" and not h.outside
    ]
    actions += [  # outside the root: the purge's promise is the root; these are listed
        Action(str(h.path), f"kept, {h.kind} of {h.owner} outside the root: delete it yourself")
        for h in found
        if h.outside and h.kind != "input"
    ]
    rewritten = [v for v in doomed if v not in unknown and unfit(_manifest(store.path / v)) is None]
    tried = rewrite_named(store.path, rewritten, _writer(store), dry_run)
    actions += tried
    left = {a.path for a in tried if a.outcome.startswith(NOT_REWRITTEN)}
    rewritten = [v for v in rewritten if f"{store.name}/{v}" not in left]
    doomed = [v for v in doomed if v not in rewritten]  # what cannot be: removed
    paths = {v: str((store.path / v).resolve()) for v in doomed}
    removed = remove_named(store.path, doomed, dry_run)
    actions += removed
    done = {a.path for a in removed if a.outcome == "removed"}
    gone = {paths[v]: f"{v} (purged)" for v in doomed if f"{store.name}/{v}" in done}
    done = {a.path for a in tried if a.outcome.startswith("rewritten")}
    gone |= {str((store.path / v).resolve()): f"{v} (as it was before the purge rewrote it)"
             for v in rewritten if f"{store.name}/{v}" in done}  # fmt: skip
    if gone and not dry_run:
        remember_purged(store, gone)
    if any(h.kind == "cache" for h in found):
        actions += clear_cache(store.path, dry_run)
    return actions


def _manifest(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _writer(store: Store) -> Callable[[Path, Path], int]:
    """What rewrites a version without the forgotten documents (`curate.forget.rewrite`)."""
    exclusions, _ = forgotten_ids(store)

    def write(source: Path, target: Path) -> int:
        ids, keys, lines, _ = version_ids(exclusions, source)  # as its inputs were then
        try:
            return Rewrite(source, target, ids, keys, lines).run()
        except CannotRepack as exc:
            raise NotRewritten(str(exc)) from None

    return write

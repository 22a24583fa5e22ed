"""Inputs touched without changing: the version built from the same bytes, found, not rebuilt.

The fingerprint identifies inputs by path, size and mtime (no input is read when nothing
changed), so `touch`, `cp -p` or a file renamed over with the same bytes gives a new
fingerprint. Before building for it, a run computes the *content fingerprint*: the same
payload with each input identified by its partitions' keys and digests
(`curate.fingerprint.content_identity`). Every build files its version under both (`Store
.alias`), so a version built from the same bytes is found and returned as is, and the new
stat fingerprint becomes an alias of it: the next run is as cheap as any up-to-date run.

Computing it reads only inputs whose stat identity changed since the digests were kept
(`curate.io.digest_cache`, filled from the build's pass-0 digests): each is planned and
hashed again, its identity checked before and after (`curate.input_watch`), once, under the
stat fingerprint's build lock, so the ranks of a job calling `prepare()` at once hash it
once (the others find the alias, or the digests kept).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from curate import input_watch
from curate.errors import CurateError
from curate.fingerprint import content_identity, fingerprint_of
from curate.io.digest_cache import DigestCache, FileDigests, file_digests, needs_whole
from curate.io.inputs import InputFile
from curate.sizes import format_size
from curate.store import Store

log = logging.getLogger(__name__)

CACHE = (".cache", "digests.json")


def load(store: Store) -> DigestCache:
    """The dataset's digest cache; empty when missing, unreadable or a link (never a reason
    to fail)."""
    try:
        return DigestCache(store.read_own(*CACHE))
    except CurateError:  # a link where the cache should be: nothing known
        return DigestCache(None)


def save(store: Store, cache: DigestCache) -> None:
    text = cache.text()
    if text is None:
        return
    try:
        store.save_own(*CACHE, text)
    except (OSError, CurateError) as exc:
        log.debug("digest cache not saved: %s", exc)


def content_fingerprint(
    store: Store, base: dict[str, Any], files: list[InputFile], target: int
) -> str | None:
    """The content fingerprint of the inputs as discovered (`digests_now`), or None when an
    input cannot be planned or hashed, or changes meanwhile: the build that follows checks
    the inputs and says what is wrong, as it would have without this look."""
    found = digests_now(store, files, target)
    return None if found is None else fingerprint_of(base, content_identity(files, found))


def digests_now(store: Store, files: list[InputFile], target: int) -> list[FileDigests] | None:
    """Every input's partition digests: kept ones for an unchanged stat identity, the
    others' partitions planned and hashed now, each file's identity checked before and
    after, and kept for the next run (a stage cache's keys need them before reading). None
    when an input cannot be hashed as discovered (what was hashed is kept all the same)."""
    started = time.perf_counter()
    cache = load(store)
    found: list[FileDigests] = []
    hashed = hashed_bytes = 0
    for inp in files:
        digests = cache.get(inp, target)
        if digests is None:
            try:
                input_watch.check(inp)  # as discovered ...
                digests = file_digests(inp, target)
                input_watch.check(inp)  # ... and still: the digests are of those bytes
            except (CurateError, OSError, ValueError) as exc:
                log.debug("content fingerprint: %s not hashed: %s", inp.label, exc)
                save(store, cache)
                return None
            hashed, hashed_bytes = hashed + 1, hashed_bytes + inp.size
        cache.keep(inp, target, digests)
        found.append(digests)
    cache.forget_others({f.path for f in files})
    save(store, cache)
    log.info("content fingerprint: %d of %d inputs hashed (%s) in %.3f s", hashed, len(files),
             format_size(hashed_bytes), time.perf_counter() - started)  # fmt: skip
    return found


def remember(
    store: Store, base: dict[str, Any], files: list[InputFile], target: int, manifest: Any
) -> str | None:
    """After a build: keep each input's digests from the manifest (its pass-0 records, of the
    inputs as discovered: the build checked them until it published) and return the content
    fingerprint they give, or None when some partition has no digest."""
    parts: dict[str, dict[str, str]] = {f.name: {} for f in files}
    for entry in manifest.get("partitions", []):
        if entry.get("input") in parts:
            parts[entry["input"]][entry["key"]] = entry.get("digest") or ""
    whole = {i["name"]: i.get("content_hash") for i in manifest.get("inputs", [])}
    cache = load(store)
    found = []
    for inp in files:
        digests = FileDigests(parts[inp.name], whole.get(inp.name) if needs_whole(inp) else None)
        cache.keep(inp, target, digests)  # one without a digest is kept, and never used
        found.append(digests)
    cache.forget_others({f.path for f in files})
    save(store, cache)
    if any(cache.get(inp, target) is None for inp in files):
        return None
    return fingerprint_of(base, content_identity(files, found))

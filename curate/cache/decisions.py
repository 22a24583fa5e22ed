"""A barrier's decision, kept in the stage cache beside what it was computed from.

The decision is a function of the barrier's parameters and of every partition's summary
basis, in input order; the basis of each is named by the key of the rows it summarized
(`CachePlan.ends`, which chains the partition's content and every stage before). So when a
rerun finds every partition's rows unchanged and the barrier's parameters the same (a
change after it: the tokenizer), the decision files and the report are taken from the
cache instead of banding, pairing and clustering the whole corpus again: MinHash's
decision over 300 MB took 12-15 s of a 34 s rerun that changed only the tokenizer. Any
change to a partition's rows, the partitions' order or the barrier's parameters changes
the key, and the decision is made again (from the cached bases).
"""

from __future__ import annotations

import json
import logging
import os
from typing import TYPE_CHECKING, Any

from curate.cache import keys as cache_keys
from curate.cache.store import Entry, StageCache

if TYPE_CHECKING:
    from curate.engines.job import Job
    from curate.stages.base import BarrierStage

log = logging.getLogger(__name__)


def decision_key(job: Job, k: int, barrier: BarrierStage) -> str | None:
    """The key of pass k's decision, or None when a partition's rows have no key."""
    if job.cache is None:
        return None
    ends = [job.cache.ends.get((k, part.key)) for part in job.partitions]
    if any(end is None for end in ends):
        return None
    return cache_keys.chain("decision", cache_keys.stage_identity(barrier), ends)


def restore(job: Job, k: int, key: str) -> dict[str, Any] | None:
    """The decision's report, with its files written to staging, when the cache holds it."""
    assert job.cache is not None
    cache = StageCache(job.cache.spec)
    try:
        entry = cache.get(key)
        if entry is None or not _valid(entry, job):
            return None
        for stale in job.staging.decisions(k):
            stale.unlink()
        for part_key, name in entry.meta["files"].items():
            data = _read(cache, entry, name)
            target = job.staging.decision(k, part_key)
            with open(target, "wb") as f:
                f.write(data)
                if job.settings.fsync:
                    f.flush()
                    os.fsync(f.fileno())
        info: dict[str, Any] = json.loads(entry.meta["info"])
        info["reused_from"] = entry.meta.get("run")  # a run's fingerprint: the manifest names it
        return info
    finally:
        cache.close()


def keep(job: Job, k: int, key: str, info: dict[str, Any]) -> None:
    """Keep the decision files pass k's decision just wrote, and its report (as JSON text:
    the entry's meta is written with sorted keys, and the manifest of a run that reuses
    the decision must list the report's keys in the order a build from scratch does)."""
    assert job.cache is not None
    cache = StageCache(job.cache.spec)
    try:
        writer = cache.writer(key)
        files = {}
        for part in job.partitions:
            path = job.staging.decision(k, part.key)
            if not path.exists():
                continue
            name = f"d-{part.key}.arrow"
            with writer.open(name) as out:
                out.write(path.read_bytes())
            files[part.key] = name
        meta = {"kind": "decision", "format": cache_keys.ENTRY_FORMAT, "run": job.cache.run_of(),
                "files": files, "info": json.dumps(info)}  # fmt: skip
        writer.commit(meta)
    except OSError as exc:  # the cache is never a reason for a run to fail
        log.warning("stage cache: decision of pass %d not kept: %s", k, exc)
    finally:
        cache.close()


def _valid(entry: Entry, job: Job) -> bool:
    meta = entry.meta
    files, info = meta.get("files"), meta.get("info")
    if meta.get("kind") != "decision" or meta.get("format") != cache_keys.ENTRY_FORMAT:
        return False
    if not isinstance(files, dict) or not isinstance(info, str):
        return False
    known = {part.key for part in job.partitions}
    return all(k in known and isinstance(n, str) and entry.file(n) for k, n in files.items())


def _read(cache: StageCache, entry: Entry, name: str) -> bytes:
    fd = cache.open_file(entry, name)
    with os.fdopen(fd, "rb") as f:
        return f.read()

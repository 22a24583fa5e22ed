"""Boundaries of plain JSONL files planned before, kept in the dataset's `.cache` folder.

Finding one boundary costs one small read (`partitions._line_start`), but at scale it is a
read the page cache no longer holds: 0.1-0.7 ms each on this machine's disk with the
file's pages dropped, so a 300 GB file in 8 MB partitions (37,500 boundaries) would take
4-26 s to plan, a spinning disk or a network filesystem far longer. A build that plans
the same file again (the recipe changed, the input did not) takes its boundaries from
here instead: 0.5 ms for a 2 GB file's 256 where planning it took 26-31 ms.

An entry is used only for a file whose stat identity (size, mtime, ctime, inode, device:
what the content-hash cache trusts too) and target size are those it was made for, and
only if it holds boundaries at all: increasing integers from 0 to the file's size, no
more of them than the target size allows. Anything else (not JSON, another shape, a
changed file) is ignored and the file planned anew; the cache is never a reason to fail.
"""

from __future__ import annotations

import itertools
import json
from typing import Any, TypeGuard

from curate.io.inputs import InputFile, stat_identity


class PlanCache:
    """What a build read from `.cache/plans.json`, and what it planned this time."""

    def __init__(self, text: str | None) -> None:
        try:
            found = json.loads(text) if text else {}
        except (ValueError, RecursionError):
            found = {}
        self._old: dict[str, Any] = found if isinstance(found, dict) else {}
        self._new: dict[str, Any] = {}

    def bounds(self, inp: InputFile, target: int) -> list[int] | None:
        """The file's boundaries (0, ..., size) if planned before for this target, else None."""
        entry = self._old.get(inp.path)
        if not isinstance(entry, dict) or entry.get("target") != target:
            return None
        if any(entry.get(k) != v for k, v in stat_identity(inp).items()):
            return None
        bounds = entry.get("bounds")
        if not _valid(bounds, inp.size, target):
            return None
        return list(bounds)

    def keep(self, inp: InputFile, target: int, bounds: list[int]) -> None:
        self._new[inp.path] = {
            **stat_identity(inp),
            "target": target,
            "bounds": bounds,
        }

    def text(self) -> str | None:
        """The cache to write (only this build's files), or None when nothing changed."""
        if self._new == self._old:
            return None
        return json.dumps(self._new, sort_keys=True, separators=(",", ":"))


def _valid(bounds: object, size: int, target: int) -> TypeGuard[list[int]]:
    if not isinstance(bounds, list) or not 2 < len(bounds) <= -(-size // target) + 1:
        return False
    if any(type(b) is not int for b in bounds) or bounds[0] != 0 or bounds[-1] != size:
        return False
    return all(a < b for a, b in itertools.pairwise(bounds))

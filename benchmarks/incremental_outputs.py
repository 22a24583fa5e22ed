"""What benchmarks/incremental.py reads off the versions a rerun after new inputs publishes.

- `decide_seconds`: each barrier's decision step, from the manifest's stage records
  (`details.decision.seconds`: reading the summaries, deciding, writing the decision files),
  the part of an incremental rerun that grows with the whole corpus.
- `bytes_of`: a version's bytes, all of them and its own: files that share no inode with
  an earlier version's (what sharing through hard links did not save), shards apart.
- `stage_work`: per stage, the partitions the rerun computed and those it took from the
  stage cache, as the manifest's cache records say.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def manifest_of(version: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((version / "manifest.json").read_text())
    return data


def decide_seconds(manifest: dict[str, Any]) -> dict[str, float]:
    """Seconds of each barrier's decision step, by stage name."""
    found = {}
    for stage in manifest.get("stages", []):
        decision = stage.get("details", {}).get("decision")
        if stage.get("kind") == "barrier" and isinstance(decision, dict):
            found[str(stage["name"])] = float(decision.get("seconds", 0.0))
    return found


@dataclass
class Bytes:
    total: int = 0  # every regular file of the version
    own: int = 0  # files sharing no inode with the earlier version's
    nlink_one: int = 0  # files no other name points at (st_nlink == 1)
    shards: int = 0  # shards/ (every split's), all of them
    own_shards: int = 0
    files: int = 0
    own_files: int = 0


def _regular_files(folder: Path) -> list[tuple[Path, os.stat_result]]:
    found = []
    for dirpath, _, filenames in os.walk(folder):
        for name in filenames:
            path = Path(dirpath) / name
            st = os.lstat(path)
            if not os.path.islink(path):
                found.append((path, st))
    return found


def bytes_of(version: Path, earlier: Path | None = None) -> Bytes:
    """The version's bytes; own: those in files sharing no inode with `earlier`'s."""
    theirs = set()
    if earlier is not None:
        theirs = {(st.st_dev, st.st_ino) for _, st in _regular_files(earlier)}
    out = Bytes()
    for path, st in _regular_files(version):
        shard = "shards" in path.relative_to(version).parts[:-1]
        own = (st.st_dev, st.st_ino) not in theirs
        out.total += st.st_size
        out.files += 1
        out.nlink_one += st.st_size if st.st_nlink == 1 else 0
        if shard:
            out.shards += st.st_size
        if own:
            out.own += st.st_size
            out.own_files += 1
            if shard:
                out.own_shards += st.st_size
    return out


def stage_work(manifest: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Per stage (by name), (partitions computed, partitions read from the stage cache), as
    its cache record says ({ran, reused}); stages without such a record are left out."""
    found = {}
    for stage in manifest.get("stages", []):
        said = stage.get("cache")
        if isinstance(said, dict) and isinstance(said.get("ran"), int):
            found[str(stage["name"])] = (said["ran"], int(said.get("reused", 0)))
    return found


def basis_docs(manifest: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Per barrier (by name), (documents whose summary basis the run computed, documents
    whose basis it took from the stage cache), as its cache record says; a tree whose
    records do not count documents gives none."""
    found = {}
    for stage in manifest.get("stages", []):
        said = stage.get("cache")
        if isinstance(said, dict) and isinstance(said.get("docs_computed"), int):
            found[str(stage["name"])] = (said["docs_computed"], int(said.get("docs_reused", 0)))
    return found


def partitions_of(manifest: dict[str, Any]) -> dict[str, int]:
    """Partitions per input name, in input order."""
    found: dict[str, int] = {}
    for part in manifest.get("partitions", []):
        found[part["input"]] = found.get(part["input"], 0) + 1
    return found

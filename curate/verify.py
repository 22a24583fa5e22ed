"""Checking a published version against its own manifest: every byte, every file, every count.

`curate verify` is what to run before a long training job, or after copying a version
to another machine: a flipped byte, a missing or an extra file, or counts that do not
reconcile are each reported by name.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import ValidationError

from curate.manifest import Manifest

_OWN_FILES = {"manifest.json", "state.json", "dataset_info.json"}


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            h.update(chunk)
    return h.hexdigest()


def verify(folder: Path) -> list[str]:
    """Problems found in a version folder; an empty list means it is intact."""
    folder = Path(folder)
    path = folder / "manifest.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return [f"{path}: missing"]
    except (OSError, ValueError) as exc:
        return [f"{path}: unreadable: {exc}"]
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        return [
            f"{path}: does not match the manifest schema: {e['loc']}: {e['msg']}"
            for e in exc.errors()
        ]

    problems: list[str] = []
    listed = {*_OWN_FILES}
    for record in [*manifest.shards, *manifest.rejected, *manifest.quarantine]:
        listed.add(record.path)
        file = folder / record.path
        if not file.is_file():
            problems.append(f"{record.path}: missing")
            continue
        size = file.stat().st_size
        if size != record.bytes:
            problems.append(f"{record.path}: {size} bytes, manifest says {record.bytes}")
        elif sha256_file(file) != record.sha256:
            problems.append(f"{record.path}: sha256 differs from the manifest (content changed)")
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = file.relative_to(folder).as_posix()
        if rel not in listed:
            problems.append(f"{rel}: not part of the version (extra file)")
    for name in ("state.json", "dataset_info.json"):
        if not (folder / name).is_file():
            problems.append(f"{name}: missing")
    c = manifest.counts
    if c.read != c.written + c.removed_total + c.quarantined:
        problems.append(
            f"counts do not reconcile: read {c.read} != written {c.written} "
            f"+ removed {c.removed_total} + quarantined {c.quarantined}"
        )
    if sum(s.rows for s in manifest.shards) != c.written:
        problems.append(
            f"shards hold {sum(s.rows for s in manifest.shards)} rows, counts say {c.written}"
        )
    return problems

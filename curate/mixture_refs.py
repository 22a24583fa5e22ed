"""Which versions of a dataset a live mixture draws from, so `curate gc` keeps them.

A mixture (`curate.mix`) holds its sources' shards through hard links, so removing a
source frees no bytes the mixture uses; but `curate verify` checks a mixture against its
sources, and a trainer or an auditor follows a mixture back to the versions it names. So
publishing a mixture leaves, in each source's dataset folder, `.mixtures/<key>-<version>`:
one line of JSON naming the mixture version's folder and the source's version and
fingerprint. gc keeps a version while such an entry names a *live* mixture: a sealed
version at that folder whose manifest lists this dataset, version and fingerprint among its
sources. An entry that names nothing live (its mixture was collected) is stale: gc
removes it. An entry is only ever a reason to keep, never to follow into or delete anything.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from curate.dirfd import Folder
from curate.sealed import VERSION_NAME, sealed_manifest

log = logging.getLogger(__name__)
FOLDER = ".mixtures"


def entry_name(mixture: Path, version: str) -> str:
    return f"{hashlib.sha256(os.fsencode(mixture)).hexdigest()[:20]}-{version}"


def record(dataset: Folder, mixture: Path, version: str, fingerprint: str, mode: int) -> None:
    """File, in a source's dataset folder (held open), that `mixture` draws from `version`."""
    text = json.dumps({"mixture": str(mixture), "version": version, "fingerprint": fingerprint})
    with dataset.folder(FOLDER, mode | 0o100) as folder:
        folder.write_atomic(entry_name(mixture, version), text + "\n", mode & 0o666, fsync=False)


def referenced(dataset: Path, held: Folder, *, prune: bool) -> dict[str, str]:
    """{version: the first live mixture folder that draws from it} for this dataset folder;
    with `prune`, stale entries are removed."""
    return {version: found[0] for version, found in _all_live(dataset, held, prune).items()}


def drawn_from(version: Path) -> list[Path]:
    """The live mixture versions that draw from the version folder `version` (sorted): what
    `curate forget --where` lists beside a version that holds forgotten documents (each
    mixture's own draw from it: `curate.mixture_lookup.mixture_sources`)."""
    version = Path(os.path.abspath(version))
    try:
        with Folder.open(version.parent) as held:
            found = _all_live(version.parent, held, prune=False)
    except OSError:
        return []
    return sorted(Path(m) for m in found.get(version.name, []))


def _all_live(dataset: Path, held: Folder, prune: bool) -> dict[str, list[str]]:
    try:
        folder = held.folder(FOLDER)
    except OSError:  # none yet (or a link: not ours, not read)
        return {}
    kept: dict[str, list[str]] = {}
    with folder:
        for entry in sorted(folder.scandir(), key=lambda e: e.name):
            if entry.name.startswith(".") or not entry.is_file(follow_symlinks=False):
                continue
            version, mixture = _live(dataset, folder, entry.name)
            if version is not None and mixture is not None:
                kept.setdefault(version, []).append(mixture)
            elif prune:
                with contextlib.suppress(OSError):
                    folder.unlink(entry.name)
    return kept


def _live(dataset: Path, folder: Folder, name: str) -> tuple[str | None, str | None]:
    try:
        data: Any = json.loads(folder.read_text(name))
        mixture, version, fingerprint = data["mixture"], data["version"], data["fingerprint"]
    except (OSError, ValueError, KeyError, TypeError):
        return None, None
    if not isinstance(version, str) or not VERSION_NAME.match(version):
        return None, None
    if not isinstance(mixture, str) or name != entry_name(Path(mixture), version):
        return None, None
    at = Path(mixture)
    manifest, _ = sealed_manifest(at.parent, at.name)
    sources = ((manifest or {}).get("mixture") or {}).get("sources") or []
    wanted = (dataset.name, version, fingerprint)
    if any((s.get("dataset"), s.get("version"), s.get("fingerprint")) == wanted for s in sources):
        return version, mixture
    return None, None

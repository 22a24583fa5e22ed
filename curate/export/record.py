"""`export.json`: what an export holds and where it came from.

It names the source version (dataset, version, fingerprint, and the sha256 of its
manifest), the tokenizer and the BOS/EOS policy the ids were made with, the token type of
the format, each part (a split, or `data`) with its rows, tokens and files, and every
file's size and xxh3_128. `curate verify` checks an export against it, and anything that
must find exports of a version (erasure requests) reads `source`. Never document text.

An export may be written anywhere, so the source's dataset folder also notes where each
went (`<dataset>/.exports/<hash of the path>.json`: path, version, format; `remember`):
`curate forget --where` reads those notes to name the exports of a version holding a
forgotten document, wherever they are. Exports made before these notes, or moved since, are
not known.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

EXPORT_MANIFEST = "export.json"
KNOWN = ".exports"  # in the source's dataset folder: where its versions were exported

log = logging.getLogger(__name__)
FORMAT = "curate.export"
FORMAT_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ExportFile(_Model):
    path: str = Field(description="Relative to the export folder.")
    bytes: int
    xxh3_128: str


class ExportSource(_Model):
    dataset: str
    version: str
    fingerprint: str
    path: str = Field(description="The version folder, absolute, when exported.")
    manifest_sha256: str = Field(description="sha256 of the version's manifest.json.")


class ExportPart(_Model):
    name: str = Field(description="The split, or `data` for a version without splits.")
    split: str | None
    rows: int = Field(description="Rows exported: documents, or packed rows.")
    tokens: int | None = Field(None, description="Token ids exported (tokenized versions).")
    files: list[str] = Field(description="The part's files (paths as in `files`).")


class ExportManifest(_Model):
    format: str = FORMAT
    format_version: int = FORMAT_VERSION
    to: str = Field(description="megatron, mds, parquet or jsonl.")
    source: ExportSource
    tokenizer: dict[str, Any] | None = Field(
        None,
        description="The tokenizer the ids were made with: source, kind, fingerprint, "
        "vocab_size and max_id (added and special tokens included) when recorded, and the "
        "BOS/EOS policy applied; null for an untokenized version.",
    )
    chat: dict[str, Any] | None = Field(
        None, description="Chat versions: the loss column (labels or loss_mask) and packing."
    )
    dtype: str | None = Field(None, description="The token ids' type in the exported files.")
    columns: list[dict[str, str]] = Field(
        description="The version's columns and Arrow types, in order (what JSONL readers cast "
        "back to)."
    )
    parts: list[ExportPart]
    files: list[ExportFile]
    software: dict[str, str]
    created: str


def write_manifest(folder: Path, manifest: ExportManifest) -> None:
    from curate.export.files import HashedFile

    text = json.dumps(manifest.model_dump(mode="json"), indent=2, sort_keys=False) + "\n"
    out = HashedFile(folder, EXPORT_MANIFEST)
    out.write(text.encode("utf-8"))
    out.close()


def remember(version: Path, target: Path, to: str) -> None:
    """Note in `version`'s dataset folder that it was exported to `target`; a folder this
    process may not write (a shared, read-only store) only costs the note, said in the log."""
    from curate.store import Store

    dataset = version.parent
    note = {"path": str(target.resolve()), "version": version.name, "to": to}
    name = hashlib.sha256(note["path"].encode()).hexdigest()[:20] + ".json"
    try:
        mode = os.stat(dataset).st_mode & 0o777
        store = Store(dataset.parent, dataset.name, dir_mode=mode, file_mode=mode & 0o666)
        store.save_own(KNOWN, name, json.dumps(note, sort_keys=True) + "\n")
    except OSError as exc:
        log.warning("export: could not note in %s where %s went (%s): curate forget --where "
                    "will not name it", dataset, target, exc.strerror or exc)  # fmt: skip


def known_exports(dataset: Path) -> list[Path]:
    """The export folders `remember` noted for this dataset folder that still hold an
    export manifest."""
    folder = dataset / KNOWN
    if not folder.is_dir() or folder.is_symlink():
        return []
    out = []
    for note in sorted(folder.glob("*.json")):
        try:
            path = Path(json.loads(note.read_text())["path"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if (path / EXPORT_MANIFEST).is_file():
            out.append(path)
    return out

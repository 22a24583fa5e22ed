"""`export.json`: what an export holds and where it came from.

It names the source version (dataset, version, fingerprint, and the sha256 of its
manifest), the tokenizer and the BOS/EOS policy the ids were made with, the token type of
the format, each part (a split, or `data`) with its rows, tokens and files, and every
file's size and xxh3_128. `curate verify` checks an export against it, and anything that
must find exports of a version (erasure requests) reads `source`. Never document text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

EXPORT_MANIFEST = "export.json"
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

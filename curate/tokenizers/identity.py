"""What identifies a tokenizer: the sha256 of its files, and one fingerprint to compare.

The fingerprint covers the family and the file that maps text to ids (plus the split
pattern of a tiktoken ranks file), not the path it was read from: a trainer that loads
the same tokenizer.json from its own copy of the model folder gets the same fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from curate.tokenizers.source import TokenizerSource

_DIGESTS: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """sha256 of a file, remembered per (path, size, mtime) so a no-op run stays cheap."""
    st = os.stat(path)
    key = (str(path), st.st_size, st.st_mtime_ns)
    digest = _DIGESTS.get(key)
    if digest is None:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        _DIGESTS[key] = digest = h.hexdigest()
    return digest


def file_digests(source: TokenizerSource) -> dict[str, str]:
    """Each tokenizer file's name -> sha256."""
    return {p.name: file_sha256(p) for p in source.files}


def fingerprint_of(source: TokenizerSource, pattern: str | None = None) -> str:
    return fingerprint_from(source.kind, file_sha256(source.main), pattern)


def fingerprint_from(kind: str, sha256: str, pattern: str | None = None) -> str:
    """A tokenizer's fingerprint from its kind, its main file's digest and, for a tiktoken
    ranks file, the split pattern (a manifest records all three)."""
    payload = {"kind": kind, "sha256": sha256}
    if kind == "tiktoken":
        payload["pattern"] = pattern or ""
    blob = json.dumps(payload, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()


def tokenizer_fingerprint(
    source: str | Path, *, kind: str = "auto", pattern: str | None = None
) -> str:
    """The fingerprint of a tokenizer on disk, as a trainer computes it to check a dataset."""
    from curate.tokenizers.source import resolve_source

    return fingerprint_of(resolve_source(str(source), Path.cwd(), kind), pattern)

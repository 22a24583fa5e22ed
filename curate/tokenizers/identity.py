"""What identifies a tokenizer: the sha256 of its files, and one fingerprint to compare.

The fingerprint covers the family and the file that maps text to ids (plus the split
pattern of a tiktoken ranks file), not the path it was read from: a trainer that loads
the same tokenizer.json from its own copy of the model folder gets the same fingerprint.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from curate.digests import remembered_sha256

if TYPE_CHECKING:
    from curate.tokenizers.source import TokenizerSource


def file_digests(source: TokenizerSource) -> dict[str, str]:
    """Each tokenizer file's name -> sha256."""
    return {p.name: remembered_sha256(p) for p in source.files}


def fingerprint_of(source: TokenizerSource, pattern: str | None = None) -> str:
    return fingerprint_from(source.kind, remembered_sha256(source.main), pattern)


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

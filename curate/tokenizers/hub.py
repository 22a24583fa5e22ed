"""A hub model id resolved from the local Hugging Face cache, never from the network."""

from __future__ import annotations

import os
from pathlib import Path

from curate.errors import CurateError

_PATTERNS = [
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "*.model",
    "*.model.*",
    "tekken*.json",
    "*.tiktoken",
]


def cache_dir() -> Path:
    """Read now, not when huggingface_hub was imported, so the environment of the call counts."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface"
    )
    return Path(home) / "hub"


def cached_snapshot(repo_id: str, revision: str | None = None) -> Path | None:
    """The snapshot folder of `repo_id` in the local cache (`HF_HUB_CACHE`, `HF_HOME`), or None
    when the cache does not hold it (the caller says so in one line: a mistyped relative path
    looks like a hub id, and the hub library's own text would only mislead)."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:  # pragma: no cover - datasets depends on huggingface_hub
        raise CurateError(
            f"tokenizer '{repo_id}': resolving a hub id needs huggingface_hub"
        ) from None
    try:
        folder = snapshot_download(
            repo_id,
            revision=revision,
            cache_dir=cache_dir(),
            local_files_only=True,
            allow_patterns=_PATTERNS,
        )
    except LocalEntryNotFoundError:
        return None
    except (FileNotFoundError, OSError, ValueError) as exc:
        raise CurateError(
            f"tokenizer '{repo_id}' is not in the local Hugging Face cache ({exc}); curate never "
            "downloads at run time: fetch it beforehand, or name a local file or folder"
        ) from None
    return Path(str(folder)).resolve()

"""A classifier model named by a recipe, resolved to files on disk, and their digests.

A path (relative to the recipe's folder) names a fastText model file (`.bin`, `.ftz`) or
a Hugging Face model folder (its `config.json`, weights and tokenizer files). A name
that is no path but looks like `org/model` is a hub id, resolved only from the local
Hugging Face cache (`HF_HUB_CACHE`, `HF_HOME`): curate never downloads at run time.

Every file the model is made of is hashed (sha256, remembered per path, size and mtime
within a process): the digests enter the fingerprint, so a retrained model rebuilds,
and the manifest names them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from curate.digests import remembered_sha256
from curate.errors import CurateError, shown

Kind = Literal["fasttext", "hf"]

_HUB_PATTERNS = ["*.json", "*.safetensors", "*.bin", "*.txt", "*.model"]
"""What a sequence-classification model folder is made of (weights, config, tokenizer)."""

_NOT_MODEL = (".md", ".gitattributes", ".lock")


@dataclass(frozen=True)
class ModelSource:
    origin: str  # what the recipe said
    kind: Kind
    path: Path  # the fastText file, or the model folder
    files: tuple[Path, ...]

    def digests(self) -> dict[str, str]:
        """Each file's name (within the folder) -> sha256."""
        base = self.path if self.kind == "hf" else self.path.parent
        return {str(p.relative_to(base)): remembered_sha256(p) for p in self.files}


def _folder_files(folder: Path) -> tuple[Path, ...]:
    """The model folder's own files (top level; no hidden files, no model cards)."""
    return tuple(
        p
        for p in sorted(folder.iterdir())
        if p.is_file() and not p.name.startswith(".") and not p.name.endswith(_NOT_MODEL)
    )


def resolve_model(origin: str, base_dir: str | Path, kind: str = "auto") -> ModelSource:
    """The files a recipe's `model` names; `kind` auto: a file is fastText, a folder with
    a config.json a Hugging Face model."""
    path = Path(origin).expanduser()
    if not path.is_absolute():
        path = Path(base_dir) / path
    if path.is_file():
        if kind == "hf":
            raise CurateError(
                f"classifier model {shown(path)} is a file; a Hugging Face model is a folder "
                "holding config.json, its weights and its tokenizer"
            )
        return ModelSource(origin, "fasttext", path.resolve(), (path.resolve(),))
    if path.is_dir():
        return _hf_folder(origin, path.resolve(), kind)
    if _looks_like_hub_id(origin) and kind != "fasttext":
        snapshot = cached_snapshot(origin)
        if snapshot is None:
            raise CurateError(
                f"classifier model '{origin}' not found: no such file or folder "
                f"({shown(path)}), and not in the local Hugging Face cache; curate never "
                "downloads at run time: fetch it beforehand, or name a local file or folder"
            )
        return _hf_folder(origin, snapshot, kind)
    raise CurateError(
        f"classifier model '{origin}' not found: no such file or folder ({shown(path)})"
    )


def _hf_folder(origin: str, folder: Path, kind: str) -> ModelSource:
    if kind == "fasttext":
        raise CurateError(f"classifier model {shown(folder)} is a folder, not a fastText file")
    if not (folder / "config.json").is_file():
        raise CurateError(
            f"classifier model folder {shown(folder)} has no config.json (a Hugging Face "
            "sequence-classification model folder holds its config, weights and tokenizer)"
        )
    return ModelSource(origin, "hf", folder, _folder_files(folder))


def _looks_like_hub_id(source: str) -> bool:
    parts = source.split("/")
    return len(parts) == 2 and all(p and not p.startswith(".") for p in parts)


def cached_snapshot(repo_id: str) -> Path | None:
    """The snapshot folder of `repo_id` in the local Hugging Face cache, or None."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    from curate.tokenizers.hub import cache_dir

    try:
        folder = snapshot_download(
            repo_id, cache_dir=cache_dir(), local_files_only=True, allow_patterns=_HUB_PATTERNS
        )
    except LocalEntryNotFoundError:
        return None
    except (FileNotFoundError, OSError, ValueError) as exc:
        raise CurateError(
            f"classifier model '{repo_id}' is not in the local Hugging Face cache ({exc}); "
            "curate never downloads at run time"
        ) from None
    return Path(str(folder)).resolve()

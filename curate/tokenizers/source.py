"""What a recipe names as its tokenizer, resolved to files on disk and a tokenizer family.

Families and how each is recognised:

- `tokenizer.json`: a Hugging Face `tokenizers` file (a JSON object with a `model` key);
- `sentencepiece`: a SentencePiece model proto (`*.model`, `tokenizer.model.v1`, ...);
- `tekken`: Mistral's tekken JSON (a JSON object with `config.pattern` and `vocab`);
- `tiktoken`: a tiktoken ranks file (`*.tiktoken`: base64 token and rank per line).

A folder is searched in that order of preference: `tokenizer.json` (what the model's
users load), then a SentencePiece model, then tekken, then a ranks file; its
`tokenizer_config.json` (BOS/EOS settings) is read when present. A name that is not a
path but looks like `org/model` is looked up in the local Hugging Face cache, offline.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from curate.errors import CurateError, shown

Kind = Literal["tokenizer.json", "sentencepiece", "tekken", "tiktoken"]
KINDS: tuple[Kind, ...] = ("tokenizer.json", "sentencepiece", "tekken", "tiktoken")

_SPM_NAMES = ("tokenizer.model", "spiece.model", "sentencepiece.model")


@dataclass(frozen=True)
class TokenizerSource:
    """The files a tokenizer is made of: the one that maps text to ids, and its config."""

    origin: str  # what the recipe said
    kind: Kind
    main: Path  # the file that determines the ids
    config: Path | None = None  # tokenizer_config.json, when one sits beside it
    extra: tuple[Path, ...] = field(default_factory=tuple)  # special_tokens_map.json, ...

    @property
    def files(self) -> list[Path]:
        return [p for p in (self.main, self.config, *self.extra) if p is not None]


def _json_head_kind(path: Path) -> Kind | None:
    """tokenizer.json or tekken, from the file's top-level keys.

    The first megabyte usually tells (tekken files begin with their config and ranks, a
    tokenizer.json with its version and settings), which keeps an up-to-date check cheap;
    otherwise the whole file is parsed.
    """
    with open(path, "rb") as f:
        head = f.read(1 << 20)
    if b'"pattern"' in head and b'"token_bytes"' in head:
        return "tekken"
    if b'"model"' in head and b'"normalizer"' in head:
        return "tokenizer.json"
    try:
        with open(path, "rb") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    if "model" in data:
        return "tokenizer.json"
    if "vocab" in data and isinstance(data.get("config"), dict) and "pattern" in data["config"]:
        return "tekken"
    return None


_RANKS_LINE = re.compile(rb"[A-Za-z0-9+/]+={0,2} [0-9]+\r?\n")


def _looks_like_ranks(path: Path) -> bool:
    with open(path, "rb") as f:
        head = f.read(256)
    return _RANKS_LINE.match(head) is not None


def _file_kind(path: Path) -> Kind:
    name = path.name
    if name.endswith(".tiktoken"):
        return "tiktoken"
    if name.endswith(".json"):
        kind = _json_head_kind(path)
        if kind is None:
            raise CurateError(
                f"tokenizer {shown(path)}: a JSON file that is neither a tokenizer.json "
                "(no 'model' key) nor a tekken file (no 'config.pattern' and 'vocab')"
            )
        return kind
    if ".model" in name:  # tokenizer.model, tokenizer.model.v1, spiece.model
        # ...or a tiktoken ranks file by that name (Llama 3's original/tokenizer.model):
        # text lines `base64 rank`, where a SentencePiece model is a binary protobuf
        return "tiktoken" if _looks_like_ranks(path) else "sentencepiece"
    with open(path, "rb") as f:
        head = f.read(200)
    kind = _json_head_kind(path) if head[:1] == b"{" else "tiktoken"
    if kind is None:
        raise CurateError(f"tokenizer {shown(path)}: JSON of an unknown tokenizer format")
    return kind


def _in_folder(folder: Path, origin: str, kind: str = "auto") -> TokenizerSource:
    config = folder / "tokenizer_config.json"
    cfg = config if config.is_file() else None
    extra = tuple(p for p in (folder / "special_tokens_map.json",) if p.is_file())
    candidates: list[tuple[Kind, Path]] = [("tokenizer.json", folder / "tokenizer.json")]
    candidates += [("sentencepiece", folder / n) for n in _SPM_NAMES]
    candidates += [("tekken", p) for p in sorted(folder.glob("tekken*.json"))]
    candidates += [("sentencepiece", p) for p in sorted(folder.glob("*.model*"))]
    candidates += [("tiktoken", p) for p in sorted(folder.glob("*.tiktoken"))]
    for found, path in candidates:
        if found == "sentencepiece" and path.is_file() and _looks_like_ranks(path):
            found = "tiktoken"  # Llama 3's original/tokenizer.model
        if path.is_file() and kind in ("auto", found):
            return TokenizerSource(origin, found, path, cfg, extra)
    wanted = "tokenizer.json, SentencePiece .model, tekken .json or .tiktoken file"
    raise CurateError(
        f"tokenizer folder {shown(folder)} holds no {wanted if kind == 'auto' else kind + ' file'}"
    )


def resolve_source(source: str, base_dir: str | Path = ".", kind: str = "auto") -> TokenizerSource:
    """The tokenizer files a recipe's `source` names; paths are relative to `base_dir`."""
    if kind != "auto" and kind not in KINDS:
        raise CurateError(f"tokenizer kind '{kind}' is not one of {', '.join(KINDS)}")
    path = Path(source).expanduser()
    if not path.is_absolute():
        path = Path(base_dir) / path
    if path.is_dir():
        found = _in_folder(path.resolve(), source, kind)
    elif path.is_file():
        path = path.resolve()
        config = path.parent / "tokenizer_config.json"
        found = TokenizerSource(
            source, _file_kind(path), path, config if config.is_file() else None
        )
    elif _looks_like_hub_id(source):
        from curate.tokenizers.hub import cached_snapshot

        snapshot = cached_snapshot(source)
        if snapshot is None:
            raise _not_found(source, base_dir, ", and not in the local Hugging Face cache")
        found = _in_folder(snapshot, source, kind)
    else:
        raise _not_found(source, base_dir)
    if kind != "auto" and kind != found.kind:  # a file whose name or content misled detection
        return TokenizerSource(found.origin, kind, found.main, found.config, found.extra)  # type: ignore[arg-type]
    return found


def _not_found(source: str, base_dir: str | Path, also: str = "") -> CurateError:
    """One line: the path tried (from the current folder) and, for a relative name, the
    folder it was resolved against (the recipe's; the current one for `open_tokens`)."""
    path = Path(source).expanduser()
    where = shown(path if path.is_absolute() else Path(base_dir) / path)
    if not path.is_absolute():
        where += f", resolved against {Path(base_dir).absolute()}"
    return CurateError(f"tokenizer '{source}' not found: no such file or folder ({where}){also}")


def _looks_like_hub_id(source: str) -> bool:
    parts = source.split("/")
    return len(parts) == 2 and all(p and not p.startswith(".") for p in parts)

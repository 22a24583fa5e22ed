"""The fingerprint: what a version's content depends on, hashed.

Two runs with the same fingerprint produce the same shards, so a published version
with the fingerprint is returned as is. It covers the recipe in canonical form
(without the settings that only change how or where a run happens: engine, output
root, fsync, permission modes, the stage cache), each input's identity (path, size and
modification time: cheap, no input is read), curate's version and output layout, and the
versions of whatever each stage's output depends on (the Unicode version of normalize,
each stage's code: its module and the modules it imports, built-in stages included).
The *content fingerprint* covers the same with each input identified by what it holds
(`content_identity`): a run whose stat fingerprint names no version looks that one up
before building (`curate.same_content`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import xxhash

from curate import __version__
from curate.cache.code import code_hash
from curate.errors import recipe_part
from curate.input_watch import hash_unchanged
from curate.io.digest_cache import FileDigests
from curate.io.inputs import InputFile
from curate.recipe import Recipe
from curate.stages.base import Stage

_OUTPUT_HOW = {"root", "fsync", "file_mode", "dir_mode", "check_space", "cache"}


def content_recipe(recipe: Recipe) -> dict[str, Any]:
    """The resolved recipe minus the settings that cannot change the output."""
    return content_keys(recipe.resolved())


def content_keys(resolved: dict[str, Any]) -> dict[str, Any]:
    """A resolved recipe (a manifest's too) minus the settings that cannot change the output."""
    data = {k: v for k, v in resolved.items() if k != "engine"}
    data["output"] = {k: v for k, v in data.get("output", {}).items() if k not in _OUTPUT_HOW}
    return data


def input_identity(files: list[InputFile], hashes: list[str] | None = None) -> list[dict[str, Any]]:
    """Path, size and mtime by default; with content hashes, names and hashes only (so moving
    or touching unchanged data does not make a new version)."""
    if hashes is not None:
        return [
            {"name": f.name, "format": f.format, "hash": h}
            for f, h in zip(files, hashes, strict=True)
        ]
    return [
        {"path": f.path, "format": f.format, "size": f.size, "mtime_ns": f.mtime_ns} for f in files
    ]


def content_hash(path: Path) -> str:
    """xxh3_128 of a file's bytes; of a folder, over its files' relative names and bytes."""
    h = xxhash.xxh3_128()
    members = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for member in members:
        if path.is_dir():
            h.update(member.relative_to(path).as_posix().encode() + b"\0")
        with open(member, "rb") as f:
            while chunk := f.read(8 << 20):
                h.update(chunk)
    return "xxh3_128:" + h.hexdigest()


def cached_content_hashes(
    load: Callable[[], str | None], files: list[InputFile], save: Callable[[str], None]
) -> list[str]:
    """Content hashes, computed only for files whose stat identity (size, mtime, ctime, inode)
    changed since cached (a file that changes while it is hashed fails the run); an updated
    cache is written by `save` (the store: with the recipe's modes); `load` reads it (None:
    no cache yet)."""
    try:
        known: dict[str, Any] = json.loads(load() or "{}")
        if not isinstance(known, dict):
            known = {}
    except ValueError:
        known = {}
    out, changed = [], False
    for f in files:
        entry = known.get(f.path)
        identity = {"size": f.size, "mtime_ns": f.mtime_ns, "ctime_ns": f.ctime_ns,
                    "inode": f.inode, "device": f.device}  # fmt: skip
        if entry and all(entry.get(k) == v for k, v in identity.items()):
            out.append(entry["hash"])
            continue
        digest = hash_unchanged(f, content_hash)
        known[f.path] = {**identity, "hash": digest}
        out.append(digest)
        changed = True
    if changed:
        save(json.dumps(known, indent=1, sort_keys=True))
    return out


CODE_KEY = "code_sha256"
"""The key of a stage's code hash in its software record (curate/cache/code.py)."""


def stage_software(stages: list[Stage]) -> list[dict[str, str]]:
    """What each stage's output depends on besides data and parameters: its libraries'
    versions and its code, built-in stages included (a bug fix in one rebuilds)."""
    out = []
    for i, stage in enumerate(stages):
        with recipe_part("stages", i, stage.name):  # a tokenizer that is not there, ...
            soft = dict(stage.software())
        soft[CODE_KEY] = code_hash(type(stage))
        out.append(soft)
    return out


OUTPUT_LAYOUT = 2
"""How a run lays out what it writes for given inputs, beyond curate's version: raised when
the same recipe and inputs would give other files (2: partitions named by their key, shard
names and packed-row ids with them), so every dataset is rebuilt once, on its next run."""


def fingerprint(
    recipe: Recipe, files: list[InputFile], stages: list[Stage], hashes: list[str] | None = None
) -> str:
    return fingerprint_of(base_payload(recipe, stages), input_identity(files, hashes))


def base_payload(recipe: Recipe, stages: list[Stage]) -> dict[str, Any]:
    """Everything a fingerprint covers but the inputs: computed once per run, for both the
    stat fingerprint and the content fingerprint (`content_identity`)."""
    return {
        "curate": __version__,
        "layout": OUTPUT_LAYOUT,
        "recipe": content_recipe(recipe),
        "stages": stage_software(stages),
    }


def fingerprint_of(base: dict[str, Any], inputs: list[dict[str, Any]]) -> str:
    payload = {**base, "inputs": inputs}
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def content_identity(files: list[InputFile], found: list[FileDigests]) -> list[dict[str, Any]]:
    """Each input by what it holds: name, format, its partitions' keys (name and range) with
    their digests, and for Parquet and Arrow the whole file's hash. The fingerprint over this
    (the *content fingerprint*) is the same for a file touched, copied with `cp -p` or
    renamed over with the same bytes, so a run finds the version built from it
    (`curate.same_content`); its shape differs from both other identities', so the three
    fingerprints never collide."""
    return [
        {
            "name": f.name,
            "format": f.format,
            "partitions": sorted(d.parts.items()),
            "whole": d.whole,
        }
        for f, d in zip(files, found, strict=True)
    ]

"""The fingerprint: what a version's content depends on, hashed.

Two runs with the same fingerprint produce the same shards, so a published version
with the fingerprint is returned as is. It covers the recipe in canonical form
(without the settings that only change how or where a run happens: engine, output
root, fsync, permission modes), each input's identity (path, size and modification
time: cheap, no input is read), curate's version and the versions of whatever each
stage's output depends on (the Unicode version of normalize, a user stage's source).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from curate import __version__
from curate.io.inputs import InputFile
from curate.recipe import Recipe
from curate.stages.base import Stage
from curate.stages.registry import BUILTIN, source_hash

_OUTPUT_HOW = {"root", "fsync", "file_mode", "dir_mode", "check_space"}


def content_recipe(recipe: Recipe) -> dict[str, Any]:
    """The resolved recipe minus the settings that cannot change the output."""
    data = recipe.resolved()
    data.pop("engine", None)
    data["output"] = {k: v for k, v in data["output"].items() if k not in _OUTPUT_HOW}
    return data


def input_identity(files: list[InputFile]) -> list[dict[str, Any]]:
    return [
        {"path": f.path, "format": f.format, "size": f.size, "mtime_ns": f.mtime_ns} for f in files
    ]


def stage_software(stages: list[Stage]) -> list[dict[str, str]]:
    out = []
    for stage in stages:
        soft = dict(stage.software())
        if stage.name not in BUILTIN or type(stage).__module__.split(".")[0] != "curate":
            soft["source_sha256"] = source_hash(type(stage))
        out.append(soft)
    return out


def fingerprint(recipe: Recipe, files: list[InputFile], stages: list[Stage]) -> str:
    payload = {
        "curate": __version__,
        "recipe": content_recipe(recipe),
        "inputs": input_identity(files),
        "stages": stage_software(stages),
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()

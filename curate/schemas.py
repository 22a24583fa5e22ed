"""JSON schemas generated from the code's own models, so the files in `schemas/` cannot drift.

The recipe schema's stage list is the union of each built-in stage's `Params` model,
plus an open entry for a user's stage named by dotted path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from curate.manifest import Manifest
from curate.recipe import Recipe
from curate.stages.registry import BUILTIN, resolve


def recipe_schema() -> dict[str, Any]:
    schema = Recipe.model_json_schema(mode="validation")
    defs: dict[str, Any] = schema.setdefault("$defs", {})
    defs.pop("StageSpec", None)
    variants: list[dict[str, Any]] = []
    for name in sorted(BUILTIN):
        params = resolve(name).Params.model_json_schema(ref_template="#/$defs/{model}")
        defs.update(params.pop("$defs", {}))
        defs[params.get("title", name)] = params
        variants.append(
            {
                "type": "object",
                "properties": {
                    name: {"anyOf": [{"$ref": f"#/$defs/{params['title']}"}, {"type": "null"}]}
                },
                "required": [name],
                "additionalProperties": False,
            }
        )
    variants.append(
        {
            "type": "object",
            "description": "A user's stage: a dotted path to a Stage class, with its parameters.",
            "patternProperties": {
                r"^[A-Za-z_][\w]*([.:][A-Za-z_][\w]*)+$": {"type": ["object", "null"]}
            },
            "minProperties": 1,
            "maxProperties": 1,
            "additionalProperties": False,
        }
    )
    schema["properties"]["stages"] = {
        "type": "array",
        "description": "Stages in order; each entry is {stage_name: {parameters}}.",
        "items": {"oneOf": variants},
    }
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "curate recipe"
    return schema


def manifest_schema() -> dict[str, Any]:
    schema = Manifest.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "curate manifest"
    return schema


def mixture_schema() -> dict[str, Any]:
    from curate.mix.spec import Mixture

    schema = Mixture.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "curate mixture"
    return schema


def _dump(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def write_schemas(folder: Path, *, check: bool = False) -> list[str]:
    """Write the schemas (or, with check, only compare); return the names that differed."""
    stale = []
    for name, schema in (
        ("recipe.schema.json", recipe_schema()),
        ("manifest.schema.json", manifest_schema()),
        ("mixture.schema.json", mixture_schema()),
    ):
        path = folder / name
        text = _dump(schema)
        if not path.exists() or path.read_text() != text:
            stale.append(name)
            if not check:
                folder.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
    return stale

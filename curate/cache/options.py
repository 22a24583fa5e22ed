"""`output.cache` in a recipe: the stage cache on or off, and its size budget.

Not part of the fingerprint (`curate.fingerprint._OUTPUT_HOW`): the cache changes how fast
a version is built, never its bytes.

The default budget is 50 GB, at most a quarter of the disk the dataset folder is on
(`default_budget`). 50 GB holds every stage's output of a corpus of about 8 GB through a
five-stage recipe (normalize, two dedups, PII, tokenize: about 6x the decoded input,
`curate.build.cache_needed`), which covers the loop the cache is for: tuning a recipe on
a sample before the full run. The quarter cap keeps the cache from taking the room
versions need on a small disk. A bigger corpus sets `max_size`; a run whose cache would
not fit skips caching with a one-line notice instead of failing.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from curate.sizes import ByteSize

DEFAULT_BUDGET = 50 * 10**9


class CacheOptions(BaseModel):
    """The stage cache's settings (`output.cache: false` turns it off)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(
        True, description="Keep each stage's output per partition: a rerun runs what changed."
    )
    max_size: ByteSize | None = Field(
        None,
        description="Size budget; least recently used entries go past it. Default: 50GB, at "
        "most a quarter of the disk.",
    )


def default_budget(disk_total: int) -> int:
    return min(DEFAULT_BUDGET, disk_total // 4)


def cache_schema(schema: dict[str, Any]) -> None:
    """In the recipe's JSON schema, `output.cache` is a boolean or the mapping."""
    ref = schema.pop("$ref", None)
    flag = {"type": "boolean"}
    schema["anyOf"] = [flag, {"$ref": ref}] if ref else [flag, *schema.pop("anyOf", [])]


def as_options(value: Any) -> Any:
    """`output.cache: true/false` stands for `{enabled: true/false}`."""
    return {"enabled": value} if isinstance(value, bool) else value

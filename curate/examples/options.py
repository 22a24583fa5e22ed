"""`output.examples` in a recipe: how many removed documents to keep per stage and reason.

`output.examples: false` keeps none, `true` the default 20, a mapping says how many. A
recipe without a `pii` stage keeps none unless it says `without_pii: true`: examples are
shown in reports, which travel further than the data, and without a pii stage nothing
would take personal values out of them first (`curate.examples.privacy`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_PER_REASON = 20


class ExamplesOptions(BaseModel):
    """Removed documents kept as examples (`output.examples: false` keeps none)."""

    model_config = ConfigDict(extra="forbid")

    per_reason: int = Field(
        DEFAULT_PER_REASON,
        ge=0,
        le=1000,
        description="Documents kept per stage and reason (0: none), chosen by the smallest "
        "hash of their id, so the same whatever the workers or engine.",
    )
    without_pii: bool = Field(
        False,
        description="Keep examples although the recipe has no pii stage to take personal "
        "values out of them first (they are shown in reports).",
    )

    def per_reason_for(self, stage_names: Iterable[str]) -> int:
        """What a run keeps: none without a pii stage, unless the recipe opted in."""
        if "pii" in stage_names or self.without_pii:
            return self.per_reason
        return 0


def examples_schema(schema: dict[str, Any]) -> None:
    """In the recipe's JSON schema, `output.examples` is a boolean or the mapping."""
    ref = schema.pop("$ref", None)
    flag = {"type": "boolean"}
    schema["anyOf"] = [flag, {"$ref": ref}] if ref else [flag, *schema.pop("anyOf", [])]


def as_options(value: Any) -> Any:
    """`output.examples: true/false` stands for the default count, or none."""
    if isinstance(value, bool):
        return {"per_reason": DEFAULT_PER_REASON if value else 0}
    return value

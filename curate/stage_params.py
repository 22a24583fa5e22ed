"""The base of every stage's parameter model, in a module of its own.

Libraries that define a rule set's parameters (`curate.quality`) subclass it without
importing the stage contracts that use them; `curate.stages.base` re-exports it, the
name user stages import.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StageParams(BaseModel):
    """Parameters of a stage: typed, validated, and the source of the recipe schema."""

    model_config = ConfigDict(extra="forbid", frozen=True)

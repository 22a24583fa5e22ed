"""A recipe's stage list split at barrier stages into segments, checked before data moves.

Within a segment the map stages are fused into one pass over each partition, and the
barrier's `summarize` runs at the end of that same pass: the data is read once per
barrier, not once per stage.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from curate.errors import CurateError
from curate.stages.base import BarrierStage, MapStage, Stage


@dataclass
class Segment:
    """Map stages run in one pass, then optionally a barrier that ends the pass."""

    maps: list[MapStage] = field(default_factory=list)
    barrier: BarrierStage | None = None


def make_plan(stages: list[Stage]) -> list[Segment]:
    """Segments in order; the last one has no barrier and is the pass that writes the shards."""
    segments = [Segment()]
    for stage in stages:
        if isinstance(stage, BarrierStage):
            segments[-1].barrier = stage
            segments.append(Segment())
        elif isinstance(stage, MapStage):
            segments[-1].maps.append(stage)
        else:
            raise CurateError(f"stage '{stage.name}' is neither a map stage nor a barrier stage")
    return segments


def check_columns(stages: list[Stage], schema: pa.Schema) -> pa.Schema:
    """Fail when a stage reads a column that is not there; return the final output schema."""
    removed_by: dict[str, str] = {}
    for i, stage in enumerate(stages):
        for column in stage.columns_read():
            if column not in schema.names:
                cause = f", but {removed_by[column]} removed it" if column in removed_by else ""
                raise CurateError(f"stages[{i}] {stage.name} reads column '{column}'{cause}")
        new_schema = stage.output_schema(schema)
        for name in set(schema.names) - set(new_schema.names):
            removed_by[name] = f"stages[{i}] {stage.name}"
        schema = new_schema
    return schema

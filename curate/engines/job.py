"""What an engine is asked to do: the plan, the partitions, and where to stage results."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from curate.cache.plan import CachePlan
from curate.engines.tasks import PassTask, RunSettings
from curate.io.partitions import Partition
from curate.plan import Segment
from curate.progress import ProgressFn, no_progress
from curate.stages.base import BarrierStage
from curate.staging.names import Staging
from curate.staging.record import PartitionRecord

__all__ = ["Job", "JobResult", "ProgressFn", "no_progress"]


@dataclass
class Job:
    staging: Staging
    segments: list[Segment]
    positions: list[list[int]]  # recipe position of each map stage, per segment
    barrier_positions: list[int]  # recipe position of each segment's barrier (-1: none)
    partitions: list[Partition]
    settings: RunSettings
    cache: CachePlan | None = None

    def _ahead(self, pass_index: int) -> BarrierStage | None:
        return _next_summarized_here(self.segments, pass_index)

    def task(self, pass_index: int, partition: Partition) -> PassTask:
        seg = self.segments[pass_index]
        previous = self.segments[pass_index - 1].barrier if pass_index else None
        return PassTask(
            pass_index=pass_index,
            partition=partition,
            staging=self.staging,
            settings=self.settings,
            maps=seg.maps,
            positions=self.positions[pass_index],
            previous=previous,
            previous_position=self.barrier_positions[pass_index - 1] if pass_index else -1,
            barrier=seg.barrier,
            barrier_position=self.barrier_positions[pass_index],
            cache=self.cache.for_task(pass_index, partition) if self.cache is not None else None,
            summaries_ahead=any(s.barrier is not None for s in self.segments[pass_index + 1 :]),
            ahead=self._ahead(pass_index),
        )


def _next_summarized_here(segments: list[Segment], k: int) -> BarrierStage | None:
    """The next pass's barrier, when this pass can summarize forgotten documents for it
    (`curate.excluded_rows`): that pass runs no map stage, this barrier changes no text, and
    no barrier comes after it."""
    barrier = segments[k].barrier
    if k + 1 >= len(segments) or barrier is None:
        return None
    nxt = segments[k + 1]
    if nxt.barrier is None or nxt.maps or barrier.changes_rows():
        return None
    return nxt.barrier if all(s.barrier is None for s in segments[k + 2 :]) else None


@dataclass
class JobResult:
    records: list[list[PartitionRecord]]  # per pass, per partition (in partition order)
    decisions: dict[int, dict[str, Any]] = field(default_factory=dict)  # barrier position -> info
    timings: dict[str, float] = field(default_factory=dict)  # wall seconds per pass

"""What an engine is asked to do: the plan, the partitions, and where to stage results."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from curate.cache.plan import CachePlan
from curate.engines.tasks import PassTask, RunSettings
from curate.excluded_rows import Ahead
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

    def _ahead(self, pass_index: int) -> tuple[Ahead, ...]:
        return _summarized_here(self.segments, pass_index)

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


def _summarized_here(segments: list[Segment], k: int) -> tuple[Ahead, ...]:
    """The passes after pass k up to the last barrier's, when pass k can summarize forgotten
    documents for each of their barriers (`curate.excluded_rows`): pass k ends at a barrier,
    and no barrier before the last changes the rows it keeps. None otherwise."""
    barriers = [i for i, s in enumerate(segments) if s.barrier is not None]
    if segments[k].barrier is None or barriers[-1] <= k:
        return ()
    last = barriers[-1]
    if any(cast(BarrierStage, segments[i].barrier).changes_rows() for i in range(k, last)):
        return ()
    return tuple(Ahead(segments[i].maps, cast(BarrierStage, segments[i].barrier))
                 for i in range(k + 1, last + 1))  # fmt: skip


@dataclass
class JobResult:
    records: list[list[PartitionRecord]]  # per pass, per partition (in partition order)
    decisions: dict[int, dict[str, Any]] = field(default_factory=dict)  # barrier position -> info
    timings: dict[str, float] = field(default_factory=dict)  # wall seconds per pass

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
            ahead=self._ahead(pass_index),
            rebuild=_rebuilt_here(self.segments, pass_index) if self.settings.excluded else (),
        )


def _summarized_here(segments: list[Segment], k: int) -> tuple[Ahead, ...]:
    """The passes after pass k whose barriers pass k can summarize forgotten documents for
    (`curate.excluded_rows`): pass k ends at a barrier, and each of those barriers comes
    before the last one and after no barrier from k on that changes the rows it keeps (what
    follows such a barrier depends on its decision). None otherwise."""
    barriers = [i for i, s in enumerate(segments) if s.barrier is not None]
    if segments[k].barrier is None or barriers[-1] <= k:
        return ()
    steps = []
    for i in range(k, barriers[-1]):
        if cast(BarrierStage, segments[i].barrier).changes_rows():
            break
        steps.append(Ahead(segments[i + 1].maps, cast(BarrierStage, segments[i + 1].barrier)))
    return tuple(steps)


def _rebuilt_here(segments: list[Segment], k: int) -> tuple[Ahead, ...]:
    """The passes before pass k, when pass k rebuilds forgotten documents from the inputs
    (`curate.excluded_rows`): the barrier before it changes the rows it keeps, and pass k
    ends at a barrier, which needs its summary of what that change left. None otherwise."""
    if k == 0 or segments[k].barrier is None:
        return ()
    if not cast(BarrierStage, segments[k - 1].barrier).changes_rows():
        return ()
    return tuple(Ahead(s.maps, cast(BarrierStage, s.barrier)) for s in segments[:k])


@dataclass
class JobResult:
    records: list[list[PartitionRecord]]  # per pass, per partition (in partition order)
    decisions: dict[int, dict[str, Any]] = field(default_factory=dict)  # barrier position -> info
    timings: dict[str, float] = field(default_factory=dict)  # wall seconds per pass

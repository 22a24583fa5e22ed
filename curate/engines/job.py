"""What an engine is asked to do: the plan, the partitions, and where to stage results."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from curate.engines.tasks import PassTask
from curate.io.batches import FieldSpec
from curate.io.partitions import Partition
from curate.output.packing import PackSpec
from curate.output.splits import SplitSpec
from curate.plan import Segment
from curate.staging.names import Staging
from curate.staging.record import PartitionRecord

ProgressFn = Callable[[str, int, int], None]
"""progress(phase, done, total): the CLI renders it; library code never prints."""


def no_progress(phase: str, done: int, total: int) -> None:
    return None


@dataclass
class Job:
    staging: Staging
    segments: list[Segment]
    positions: list[list[int]]  # recipe position of each map stage, per segment
    barrier_positions: list[int]  # recipe position of each segment's barrier (-1: none)
    partitions: list[Partition]
    fields: FieldSpec
    on_error: str
    final_schema: pa.Schema
    shard_bytes: int
    fsync: bool = True
    file_mode: int = 0o640
    write_rejected: bool = True
    batch_bytes: int = 8 << 20
    max_document_bytes: int = 64 << 20
    packing: PackSpec | None = None  # rows packed per partition by the shard writer
    split: SplitSpec | None = None  # held-out splits, decided per document by the shard writer
    stop_early: bool = False  # a partition all quarantined for one field fails the run at once

    def task(self, pass_index: int, partition: Partition) -> PassTask:
        seg = self.segments[pass_index]
        previous = self.segments[pass_index - 1].barrier if pass_index else None
        return PassTask(
            pass_index=pass_index,
            partition=partition,
            staging=self.staging,
            maps=seg.maps,
            positions=self.positions[pass_index],
            fields=self.fields,
            on_error=self.on_error,
            previous=previous,
            previous_position=self.barrier_positions[pass_index - 1] if pass_index else -1,
            barrier=seg.barrier,
            final_schema=self.final_schema,
            shard_bytes=self.shard_bytes,
            fsync=self.fsync,
            file_mode=self.file_mode,
            write_rejected=self.write_rejected,
            batch_bytes=self.batch_bytes,
            max_document_bytes=self.max_document_bytes,
            packing=self.packing,
            split=self.split,
            stop_early=self.stop_early,
        )


@dataclass
class JobResult:
    records: list[list[PartitionRecord]]  # per pass, per partition (in partition order)
    decisions: dict[int, dict[str, Any]] = field(default_factory=dict)  # barrier position -> info
    timings: dict[str, float] = field(default_factory=dict)  # wall seconds per pass

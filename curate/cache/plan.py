"""The stage cache's side of a job: the keys each partition's pass starts from.

The driver makes one `CachePlan` per build: per pass, the identities of its map stages and
of the barrier's basis (`curate.cache.keys`), and per partition what is known before any
worker runs: pass 0's content digests (when an earlier build hashed the unchanged file)
and, after each pass, the key of the rows each partition ended it with (from its record),
which the next pass's keys chain from. Workers finish the keys (`PassKeys.resolved`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from curate.cache import keys as cache_keys
from curate.cache.replay import PassKeys
from curate.cache.store import CacheSpec

if TYPE_CHECKING:
    from curate.io.partitions import Partition
    from curate.plan import Segment
    from curate.staging.record import PartitionRecord


@dataclass
class CachePlan:
    """The stage cache's side of a job: the keys every task starts from (`curate.cache`)."""

    spec: CacheSpec
    keys: list[PassKeys]  # per pass: the identities of its stages, no partition's input yet
    digests: dict[str, str] = field(default_factory=dict)  # partition key -> digest, if known
    ends: dict[tuple[int, str], str] = field(default_factory=dict)  # (pass, partition) -> key
    origins: dict[str, str] = field(default_factory=dict)  # partition -> pass 0's input key

    def for_task(self, pass_index: int, partition: Partition) -> PassKeys | None:
        keys = self.keys[pass_index]
        if pass_index == 0:
            return replace(keys, digest=self.digests.get(partition.key))
        after = self.ends.get((pass_index - 1, partition.key))
        origin = self.origins.get(partition.key)  # for the basis's family key
        return replace(keys, after=after, origin=origin) if after is not None else None

    def run_of(self) -> str:
        """The fingerprint of the run these keys are for (named in the entries it keeps)."""
        return self.keys[0].run if self.keys else ""

    def remember(self, pass_index: int, records: list[PartitionRecord]) -> None:
        for record in records:
            if record.cache_key is not None:
                self.ends[(pass_index, record.partition)] = record.cache_key
            if pass_index == 0 and record.cache_key is not None and record.digest is not None:
                data = self.keys[0].data
                self.origins[record.partition] = cache_keys.input_key(
                    record.partition, record.digest, data
                )


def cache_plan(
    spec: CacheSpec, segments: list[Segment], resolved_recipe: dict, run: str
) -> CachePlan:
    """The keys of every pass of a build, before any partition is known."""
    data = cache_keys.data_key(resolved_recipe)
    passes = []
    shapes = [(s.maps, s.barrier) for s in segments]
    families = cache_keys.family_prefixes(shapes)
    map_families = cache_keys.map_family_prefixes(shapes)
    for segment, family, map_family in zip(segments, families, map_families, strict=True):
        maps = tuple(cache_keys.stage_identity(stage) for stage in segment.maps)
        basis = cache_keys.basis_identity(segment.barrier) if segment.barrier else None
        passes.append(PassKeys(spec=spec, run=run, data=data, maps=maps, basis=basis,
                               family=family, map_family=map_family))  # fmt: skip
    return CachePlan(spec, passes)

"""Dropping forgotten documents from rows by id, where a run handles them (worker side).

A run passes the ids it excludes (`curate.forget.resolve`) in its settings, sorted. A later
run reads the inputs again, so a forgotten document enters it; it is dropped at the first
point where nothing ahead needs it, and counted as forgotten there (`PartitionRecord.
forgotten`), so the counts reconcile wherever that is:

- **After the last barrier's summary** (`curate.engines.tasks`): a barrier still takes its
  summary (hashes, MinHash signatures), since forgetting a cluster's kept document must not
  promote another member, which a rebuild excluding it after deduplication would not keep.
  Its text is then needed by nothing, so it is not staged for the next pass: no staging
  file (left by a crashed run too) holds it. Before that, it runs through the map stages
  in memory as every document does, because a barrier's summary is of the text those
  stages leave (normalize before MinHash), and a filter dropping it there keeps it out of
  the barrier as in the rebuild.
- **Between two barriers** (exact_dedup, then pii or a filter, then minhash_dedup): the
  first barrier's pass also runs it, in memory, through the map stages up to each later
  barrier and makes that barrier's summary of it (`summarize_ahead`), as the later passes
  would from its staged text, and stages those summaries (`ahead-*.arrow`: hashes,
  signatures) instead of the document. A filter among those stages dropping it keeps it
  out of the later barriers, as in the rebuild; the stages' counts, statistics and examples
  never see it. Each later barrier's pass adds its own summaries of them unless an earlier
  barrier's decision dropped them, and hands the rest on (`ahead_summaries`). This goes up
  to the first barrier that changes the rows it keeps (a barrier with `decision_fields`:
  line_dedup removes lines, minhash_dedup's `cluster_size` and classifier_buckets add
  columns), since what follows it depends on its decision.
- **After a barrier that changes rows, when another barrier follows**: nothing of the
  document is staged either. The pass after that barrier reads the partition from its
  input again, keeps the forgotten documents, and runs them, in memory, through every
  pass before it (map stages, each barrier's decision applied, changes included) and its
  own map stages, to summarize them for its barrier (and ahead, as above): the rows a
  staged copy would have given it (`PartitionRun._rebuilt`). Rebuilding costs one more
  read of the partitions that hold a forgotten document, in that pass only. It is chosen
  over staging them encrypted under a key held in memory, which would have to reach
  every worker (Ray ships task arguments through its object store, which may spill to
  disk), and which a resumed run could not read; and over summarizing ahead through a
  barrier that only adds columns, which is sound only while every stage after it
  declares every column it reads (a user's stage need not). The input is checked
  unchanged as the first pass checks it, so the documents rebuilt are the documents read.
- **On entering the final pass**, without a barrier at all (right after reading), or when
  an earlier pass could not leave it out (its rows were not written again, but named in a
  stage-cache entry or the previous staging: `curate.engines.staged_rows`).
- **At the shard writer**, when the final pass replays stage-cache entries kept before it
  was forgotten (`curate forget` itself: no stage runs again); their counts include it as
  they did then. The shards are the same either way (the same rows reach the writer in
  the same order); a stage's examples may show one fewer (the forgotten one is not shown).
- Never in rejected rows or examples (`tasks`, `curate.examples.files`), and never in a
  stage-cache entry: a partition holding one keeps none in the pass that reads it, nor in
  any pass after it dropped one (`forgot_before`): those entries would lack a document a
  run without the exclusion (another dataset sharing the cache) would replay.

Statistics of the map stages before the last barrier count it as they count every
document they see (figures, no text); examples never show it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from curate.io.batches import ID, QuarantineRecord, local_orders, with_partition
from curate.io.partitions import Partition
from curate.output.shards import read_stream
from curate.stages.base import BarrierStage, MapStage, StageCounts
from curate.stages.chain import run_maps
from curate.staging.names import Staging

Rows = TypeVar("Rows", pa.RecordBatch, pa.Table)


@lru_cache(maxsize=4)
def _value_set(excluded: tuple[str, ...]) -> pa.Array:
    return pa.array(excluded, pa.string())


def hits(rows: pa.RecordBatch | pa.Table, excluded: tuple[str, ...], column: str = ID) -> pa.Array:
    """Which rows are excluded (a boolean array)."""
    values = rows.column(column)
    if values.type != pa.string():
        values = values.cast(pa.string())
    return pc.is_in(values, value_set=_value_set(excluded)).fill_null(False)


def without(rows: Rows, excluded: tuple[str, ...], column: str = ID) -> tuple[Rows, int]:
    """The rows less the excluded ones, and how many went."""
    if not excluded or rows.num_rows == 0 or column not in rows.schema.names:
        return rows, 0
    hit = hits(rows, excluded, column)
    n = pc.sum(hit).as_py() or 0
    if not n:
        return rows, 0
    return rows.filter(pc.invert(hit)), int(n)


def forgot_before(staging: Staging, k: int, partition: str, excluded: tuple[str, ...]) -> bool:
    """Whether a pass before k dropped forgotten documents of this partition (its record,
    complete before pass k starts, says so)."""
    if not excluded:
        return False
    for earlier in range(k):
        path = staging.record(earlier, partition)
        if path.exists() and json.loads(path.read_text()).get("forgotten"):
            return True
    return False


def listed(
    records: list[QuarantineRecord], excluded: frozenset[tuple[str, int]]
) -> tuple[list[QuarantineRecord], int]:
    """The quarantined records a quarantine file lists, less those `curate forget` took (by
    input name and line offset: `curate.forget.quarantined`), and how many went."""
    if not excluded:
        return records, 0
    kept = [r for r in records if r.offset is None or (r.file, r.offset) not in excluded]
    return kept, len(records) - len(kept)


@dataclass(frozen=True)
class Ahead:
    """A pass's map stages and the barrier that ends it: what a forgotten document goes
    through, in memory, for a later barrier's summary (`summarize_ahead`, and the passes
    before one that rebuilds it, `curate.engines.tasks.PartitionRun._rebuilt`)."""

    maps: list[MapStage]
    barrier: BarrierStage


def summarize_ahead(
    gone: pa.RecordBatch, steps: Sequence[Ahead], k: int
) -> Iterator[tuple[int, pa.RecordBatch]]:
    """Each later barrier's summary of forgotten documents that pass k's barrier summarized
    (`gone`, set-up stages), with the pass whose barrier it is: the documents run through
    the map stages before it as that pass would run them, what a filter drops going no
    further. Nothing of the stages' counts is kept: the documents are counted as forgotten
    in pass k, where they leave."""
    for target, step in enumerate(steps, start=k + 1):
        if step.maps:
            gone = run_maps(gone, step.maps, [StageCounts() for _ in step.maps], [])
        if gone.num_rows == 0:
            return
        yield target, local_orders(step.barrier.summarize(gone))


def ahead_summaries(
    staging: Staging, k: int, partition: Partition, drops: Any
) -> tuple[list[pa.RecordBatch], dict[int, list[pa.RecordBatch]]]:
    """The later barriers' summaries of forgotten documents that pass k handed on (made by a
    barrier's pass, `summarize_ahead`), less those its barrier's decision dropped (a dropped
    document takes part in no later barrier, as in a run that staged it): the summaries for
    this pass's barrier, and the others by the pass they are for, which this pass hands on in
    turn. (This pass reads no stage-cache entry kept before the forget, which would hold the
    documents as rows: `forgot_before`.)"""
    mine: list[pa.RecordBatch] = []
    later: dict[int, list[pa.RecordBatch]] = {}
    if k < 0:
        return mine, later
    path = staging.record(k, partition.key)
    if not path.exists():
        return mine, later
    files = json.loads(path.read_text()).get("ahead") or []
    dropped = drops.ids if drops is not None else pa.array([], pa.string())
    for info in files:
        target = info.get("pass", k + 1)
        for batch in read_stream(staging.root / info["path"]).to_batches():
            batch = with_partition(batch, partition.index)
            if len(dropped):
                batch = batch.filter(pc.invert(pc.is_in(batch.column(ID), value_set=dropped)))
            if batch.num_rows:
                (mine if target == k + 1 else later.setdefault(target, [])).append(batch)
    return mine, later

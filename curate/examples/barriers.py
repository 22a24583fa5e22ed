"""A barrier's examples: documents it removed, each with the document it kept instead.

Both texts exist in the rows the barrier decided on, which the pass before it handed on
(staged, or kept in the stage cache: `curate.engines.staged_rows` reads either, and both
last until publish), and the decision files say who went, why,
which document each one duplicated and how similar they were. So at publish the choice is
made from every partition's decision (smallest id hashes per reason) and the texts are
fetched from the staged rows: nothing runs in the passes, nothing is read from the inputs,
and a rerun that took the decision or the rows from the stage cache stages the same rows
and decision files, so it finds the same examples.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from curate.cache.store import StageCache
from curate.engines.staged_rows import staged_rows
from curate.io.batches import ID
from curate.io.partitions import Partition
from curate.output.shards import read_stream
from curate.stages.base import REJECTED_SCHEMA, BarrierStage, dropping
from curate.stages.examples import CANDIDATES, choose, clip, id_hash
from curate.staging.names import Staging


def barrier_candidates(
    staging: Staging,
    k: int,
    partitions: list[Partition],
    barrier: BarrierStage,
    per_reason: int,
    cache: StageCache | None,
) -> pa.Table | None:
    """The examples of the barrier ending pass `k`, text not yet through PII; None when
    it removed nothing. `cache`: the stage cache, held, when the run has one."""
    decisions = [staging.decision(k, part.key) for part in partitions]
    parts = [dropping(read_stream(p)).select(REJECTED_SCHEMA.names) for p in decisions
             if p.is_file()]  # fmt: skip
    if not parts:
        return None
    decided = pa.concat_tables(parts).cast(REJECTED_SCHEMA)
    if decided.num_rows == 0:
        return None
    ids = decided.column(ID).to_pylist()
    table = pa.table(
        {
            "position": pa.array([barrier.context.position] * len(ids), pa.int32()),
            "stage": decided.column("stage"),
            "reason": decided.column("reason"),
            "id": decided.column(ID),
            "hash": pa.array([id_hash(i) for i in ids], pa.uint64()),
            "text": pa.nulls(len(ids), pa.string()),
            "characters": pa.nulls(len(ids), pa.int64()),
            "kept_id": decided.column("duplicate_of"),
            "kept_text": pa.nulls(len(ids), pa.string()),
            "similarity": decided.column("similarity"),
            "changed": pa.array([False] * len(ids), pa.bool_()),
        },
        schema=CANDIDATES,
    )
    chosen = choose(table, per_reason)
    wanted = chosen.column(ID).to_pylist()
    kept = chosen.column("kept_id").to_pylist()
    needed = {*wanted, *(i for i in kept if i is not None)}
    texts = _texts(staging, k, partitions, barrier, needed, cache)
    columns = {name: chosen.column(name) for name in CANDIDATES.names}
    columns["text"] = pa.array(
        [clip(texts[i][0]) if i in texts else None for i in wanted], pa.string()
    )
    lengths = [texts[i][1] if i in texts else None for i in wanted]
    columns["characters"] = pa.array(lengths, pa.int64())
    columns["kept_text"] = pa.array(
        [clip(texts[i][0]) if i in texts else None for i in kept], pa.string()
    )
    return pa.table(columns, schema=CANDIDATES)


def _texts(
    staging: Staging,
    k: int,
    partitions: list[Partition],
    barrier: BarrierStage,
    ids: set[str],
    cache: StageCache | None,
) -> dict[str, tuple[str | None, int]]:
    """The text (and its length) of each of `ids` in the rows pass k handed the barrier,
    wherever they are kept (`curate.engines.staged_rows`: staged, or a stage cache entry)."""
    found: dict[str, tuple[str | None, int]] = {}
    value_set = pa.array(sorted(ids), pa.string())
    for part in partitions:
        for batch in staged_rows(staging, k, part, cache):
            hit = batch.filter(pc.is_in(batch.column(ID), value_set=value_set))
            if hit.num_rows == 0:
                continue
            texts = barrier.document_texts(hit).to_pylist()
            for i, text in zip(hit.column(ID).to_pylist(), texts, strict=True):
                found[i] = (text, len(text) if text is not None else 0)
    return found

"""The rows a pass hands the next one, read back wherever they are kept.

A pass that ends at a barrier stages its surviving rows for the next pass. Writing them is
skipped where they already sit on disk, and the pass's record says where (`rows_from`):
- `{"entry": KEY}`: every map stage of the pass was replayed from the stage cache, so the
  last stage's entry holds exactly the rows, batch for batch (`curate.cache.replay`);
- `{"source": true}`: the pass has no map stage, so its rows are the rows it read less
  what the previous barrier decided to drop, and the next pass reads those again and drops
  the same ids.

Either way the next pass sees the very batches a written copy would have given it (same
rows, same order, same chunking), so the version is byte-identical; what is saved is a
write and a read of the corpus per pass, which is most of a rerun's cost when the stage
cache holds everything before the stage that changed. The build holds the cache shared
for its whole run (`StageCache.using`), so no entry is evicted between two passes; one
found damaged or gone is reported, its pass's record removed, and the next run computes
that partition's pass again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from curate.cache.replay import entry_batches
from curate.cache.store import StageCache
from curate.errors import CurateError
from curate.io.batches import ID, with_partition
from curate.io.partitions import Partition
from curate.output.shards import read_stream
from curate.stages.base import dropping
from curate.staging.names import Staging


def staged_rows(
    staging: Staging, k: int, part: Partition, cache: StageCache | None
) -> Iterator[pa.RecordBatch]:
    """The rows partition `part` staged in pass k for pass k + 1, batch by batch."""
    record = json.loads(staging.record(k, part.key).read_text())
    where = record.get("rows_from")
    if where is None:
        for path in staging.staged_data(k, part.key):
            for batch in read_stream(path).to_batches():
                yield with_partition(batch, part.index)  # staged with the row alone
    elif "entry" in where:
        entry = cache.get(where["entry"]) if cache is not None else None
        if cache is None or entry is None:
            staging.record(k, part.key).unlink(missing_ok=True)  # recomputed by the next run
            raise CurateError(
                f"partition {part.key}: its rows after pass {k + 1} were kept in a stage cache "
                f"entry that is now gone or damaged; run again and pass {k + 1} is computed "
                "again for it"
            )
        for batch in entry_batches(cache, entry, "rows.arrow"):
            yield with_partition(batch, part.index)
    elif where.get("source"):
        drops = dropped_ids(staging, k - 1, part.key)
        for batch in staged_rows(staging, k - 1, part, cache):
            if len(drops):
                batch = batch.filter(pc.invert(pc.is_in(batch.column(ID), value_set=drops)))
            if batch.num_rows:
                yield batch
    else:
        raise ValueError(f"unknown rows_from in pass {k} record of {part.key}: {where!r}")


def unfiltered_rows(
    staging: Staging, k: int, part: Partition, cache: StageCache | None
) -> Iterator[pa.RecordBatch]:
    """The rows partition `part` staged in pass k as the last pass that wrote rows left
    them: before the passes since (which have no map stage) dropped what their barriers
    decided. Their text is what pass k + 1 sees of every one of them, so a pass reusing
    its stages' work document by document reads there the documents a new decision drops
    (`curate.cache.by_document`)."""
    record = json.loads(staging.record(k, part.key).read_text())
    where = record.get("rows_from")
    if where is not None and where.get("source") and k > 0:
        yield from unfiltered_rows(staging, k - 1, part, cache)
        return
    yield from staged_rows(staging, k, part, cache)


def dropped_ids(staging: Staging, k: int, partition: str) -> pa.Array:
    """The ids barrier k's decision drops from the partition (none when it has no file)."""
    path = staging.decision(k, partition)
    if not path.exists():
        return pa.array([], pa.string())
    return dropping(read_stream(path)).column(ID).combine_chunks()

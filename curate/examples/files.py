"""The version's `examples/` folder: one Arrow file per stage that removed something.

Written at publish from what the run recorded: the examples the map stages chose
(`examples-*.arrow` in the staging folder, named by the partitions' records) and each
barrier's (`curate.examples.barriers`), merged by `choose` (the smallest id hashes per
stage and reason), then every text and id through the recipe's pii stages
(`curate.examples.privacy`). Each file is listed in the manifest (`examples`: path,
rows, bytes, sha256), so `curate verify` checks it as it checks a shard.

Columns (`SCHEMA`): `key` (xxh3_128 of the document id: an erasure finds a document's
examples by it, and no id is stored as it is), `id` (the id as shown, through PII),
`position`, `stage`, `reason`, `text` (at most `SHOWN` characters, through PII),
`characters` (the document's whole length), and for duplicates `kept_key`, `kept_id`,
`kept_text` (the document kept in its place) and `similarity`. Rows are ordered by
reason, then by the hash that chose them.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from curate.cache.store import CacheSpec, StageCache
from curate.errors import CurateError
from curate.examples.barriers import barrier_candidates
from curate.examples.privacy import Redactor
from curate.excluded_rows import without
from curate.io.partitions import Partition
from curate.output.shards import read_stream, write_table
from curate.stages.base import BarrierStage, Stage
from curate.stages.examples import CANDIDATES, choose, key_of
from curate.staging.names import Staging
from curate.staging.record import PartitionRecord

FOLDER = "examples"

SCHEMA = pa.schema(
    [
        pa.field("key", pa.string()),
        pa.field("id", pa.string()),
        pa.field("position", pa.int32()),
        pa.field("stage", pa.string()),
        pa.field("reason", pa.string()),
        pa.field("text", pa.string()),
        pa.field("characters", pa.int64()),
        pa.field("kept_key", pa.string()),
        pa.field("kept_id", pa.string()),
        pa.field("kept_text", pa.string()),
        pa.field("similarity", pa.float32()),
    ]
)


def file_name(position: int, stage: str) -> str:
    return f"{FOLDER}/{position:02d}-{stage}.arrow"


def write_examples(
    staging: Staging,
    records: list[list[PartitionRecord]],
    partitions: list[Partition],
    barriers: Sequence[BarrierStage | None],
    stages: Sequence[Stage],
    per_reason: int,
    out: Path,
    *,
    cache: CacheSpec | None = None,
    fsync: bool = True,
    file_mode: int = 0o640,
    excluded: tuple[str, ...] = (),
) -> list[dict[str, object]]:
    """Write the version's examples into `out` (the version being built); their file
    records (path relative to `out`, rows, bytes, sha256), in stage order. `barriers`
    holds the barrier ending each pass (None for the last); `cache`, the run's stage
    cache, where a pass may have left the rows a barrier saw."""
    if per_reason <= 0:
        return []
    parts = [_staged(staging, f["path"]) for rs in records for r in rs for f in r.files.examples]
    with ExitStack() as stack:
        held = stack.enter_context(StageCache(cache).using()) if cache is not None else None
        for k, barrier in enumerate(barriers):
            if barrier is not None and k + 1 < len(records):
                found = barrier_candidates(staging, k, partitions, barrier, per_reason, held)
                if found is not None:
                    parts.append(found)
        if not parts:
            return []
        shown = pa.concat_tables(parts)
        for column in ("id", "kept_id") if excluded else ():  # curate.forget: not shown
            shown = without(shown, excluded, column)[0]
        chosen = choose(shown, per_reason)
        redactor = Redactor(stages, held)
        written = []
        positions = chosen.column("position").to_pylist()
        for position in sorted(set(positions)):
            rows = chosen.filter(pc.equal(chosen.column("position"), position))
            table = _shown(rows, position, redactor)
            path = out / file_name(position, table.column("stage")[0].as_py())
            path.parent.mkdir(exist_ok=True)
            info = write_table(path, table, fsync=fsync, file_mode=file_mode, relative_to=out)
            written.append(info.to_dict())
    return written


def _staged(staging: Staging, name: str) -> pa.Table:
    path = staging.resolve(name)
    if path is None:  # a completed record names files of the staging folder only
        raise CurateError(f"{staging.root}: a record names {name!r}, outside it")
    return read_stream(path).cast(CANDIDATES)


def _shown(rows: pa.Table, position: int, redactor: Redactor) -> pa.Table:
    """One stage's chosen rows as the version keeps them: keys for ids, texts through PII."""
    ids = rows.column("id").to_pylist()
    kept = rows.column("kept_id").to_pylist()
    texts = rows.column("text").to_pylist()
    changed = rows.column("changed").to_pylist()
    removed = [i for i, c in enumerate(changed) if not c]
    offered = [i for i, c in enumerate(changed) if c]  # through the stage itself already
    for picked, start in ((removed, position), (offered, position + 1)):
        shown = redactor.texts(start, [texts[i] for i in picked])
        for i, text in zip(picked, shown, strict=True):
            texts[i] = text
    kept_keys = [key_of(i) if i is not None else None for i in kept]
    return pa.table(
        {
            "key": pa.array([key_of(i) for i in ids], pa.string()),
            "id": pa.array(redactor.ids(ids), pa.string()),
            "position": rows.column("position"),
            "stage": rows.column("stage"),
            "reason": rows.column("reason"),
            "text": pa.array(texts, pa.string()),
            "characters": rows.column("characters"),
            "kept_key": pa.array(kept_keys, pa.string()),
            "kept_id": pa.array(redactor.ids(kept), pa.string()),
            "kept_text": pa.array(
                redactor.texts(position, rows.column("kept_text").to_pylist()), pa.string()
            ),
            "similarity": rows.column("similarity"),
        },
        schema=SCHEMA,
    )

"""Which removed documents become examples, chosen where they are removed.

Examples (`curate.examples`) are the K documents with the smallest `(xxh3_64(id), id)` per
(stage position, reason): a function of the set of removed ids, so the choice merges
exactly in any order and from any split of the work (chunks, flushes, partitions,
workers), and nothing depends on scheduling; there is no reservoir.

The text of a document a filter removes exists only in the batch the filter was handed:
no later step sees it. So `run_maps` calls `attach` right after the stage, which picks per
reason the rows with the smallest id hashes and adds their text, clipped, in the `example`
column. The rows travel on as every removed row does: to the partition's side outputs
(`candidates` takes the chosen out at each flush) and into the stage cache's entry, so a
replay hands them back exactly as a run computed them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from curate.io.batches import ID

if TYPE_CHECKING:
    from curate.stages.base import Stage

COLUMN = "example"
"""The column a map stage's removed rows carry (in the pass and in the stage cache) when
examples are on: where the row was chosen, the stage's position (two stages may share a
name), the document's text (`clip`ped) and its whole length, and whether it was removed
(a stage may offer documents it only changed: `offer`); null elsewhere."""
TYPE = pa.struct(
    [
        pa.field("position", pa.int32()),
        pa.field("text", pa.string()),
        pa.field("characters", pa.int64()),
        pa.field("removed", pa.bool_()),
    ]
)

NOT_SHOWN = -1
"""`characters` of an offered pair that was not chosen: a row with no text, not an example."""

SHOWN = 1000
"""Characters of a document an example keeps (a report shows a glimpse, not the document)."""
MARGIN = 300
"""Characters kept past `SHOWN` until the text has been through PII: a value cut in half
at the end is still found whole, and then cut away with the rest."""


def with_examples(schema: pa.Schema) -> pa.Schema:
    """The removed rows' schema (`REJECTED_SCHEMA`) with the `example` column."""
    return schema.append(pa.field(COLUMN, TYPE))


CANDIDATES = pa.schema(
    [
        pa.field("position", pa.int32()),
        pa.field("stage", pa.string()),
        pa.field("reason", pa.string()),
        pa.field("id", pa.string()),
        pa.field("hash", pa.uint64()),
        pa.field("text", pa.string()),
        pa.field("characters", pa.int64()),
        pa.field("kept_id", pa.string()),
        pa.field("kept_text", pa.string()),
        pa.field("similarity", pa.float32()),
        pa.field("changed", pa.bool_()),
    ]
)
"""Chosen documents before publish (staged per partition and flush), text not yet through
PII; `characters` is the whole document's length, `kept_*` what a duplicate duplicates,
`changed` true for a document the stage changed and offered (its text is the stage's own
output: a pii stage's already shows every value it finds as its type)."""


def id_hash(value: str) -> int:
    return xxhash.xxh3_64_intdigest(value.encode("utf-8", "surrogatepass"))


def key_of(value: str) -> str:
    """The key an example file holds for a document id (never the id itself, which may be
    personal): what an erasure computes from the id to find the document's examples."""
    return xxhash.xxh3_128_hexdigest(value.encode("utf-8", "surrogatepass"))


def clip(text: str | None) -> str | None:
    """A document's text as captured: the part an example shows, and the margin PII needs."""
    return text[: SHOWN + MARGIN] if text is not None else None


def smallest(keys: Sequence[tuple[object, int, str]], k: int) -> list[int]:
    """Indices of the k smallest (hash, id) per group; `keys` holds (group, hash, id)."""
    by_group: dict[object, list[tuple[int, str, int]]] = {}
    for i, (group, h, doc) in enumerate(keys):
        by_group.setdefault(group, []).append((h, doc, i))
    chosen: list[int] = []
    for items in by_group.values():
        items.sort()
        chosen += [i for _, _, i in items[:k]]
    return sorted(chosen)


def choose(table: pa.Table, k: int) -> pa.Table:
    """The k examples per (position, reason) of a `CANDIDATES` table, ordered by position,
    reason, hash and id: the same rows and order from any union of candidate tables."""
    table = table.cast(CANDIDATES)
    if table.num_rows == 0:
        return table
    positions = table.column("position").to_pylist()
    reasons = table.column("reason").to_pylist()
    hashes = table.column("hash").to_pylist()
    ids = table.column("id").to_pylist()
    keys = [((p, r), h, d) for p, r, h, d in zip(positions, reasons, hashes, ids, strict=True)]
    rows = smallest(keys, k)
    rows.sort(key=lambda i: (positions[i], reasons[i], hashes[i], ids[i]))
    return table.take(pa.array(rows, pa.int64())).combine_chunks()


def candidates(removed: list[pa.Table], k: int) -> pa.Table | None:
    """The chosen rows of a partition's removed tables (those carrying `COLUMN`), trimmed to
    k per (position, reason); None when none carries any."""
    parts = []
    for table in removed:
        if COLUMN not in table.column_names:
            continue
        example = table.column(COLUMN)
        shown = pc.greater_equal(pc.struct_field(example, "characters"), 0)
        picked = table.filter(pc.and_(example.is_valid(), pc.fill_null(shown, False)))
        if picked.num_rows == 0:
            continue
        ids = picked.column("id").to_pylist()
        example = picked.column(COLUMN).combine_chunks()
        parts.append(
            pa.table(
                {
                    "position": example.field("position"),
                    "stage": picked.column("stage"),
                    "reason": picked.column("reason"),
                    "id": picked.column("id"),
                    "hash": pa.array([id_hash(i) for i in ids], pa.uint64()),
                    "text": example.field("text"),
                    "characters": example.field("characters"),
                    "kept_id": picked.column("duplicate_of"),
                    "kept_text": pa.nulls(picked.num_rows, pa.string()),
                    "similarity": picked.column("similarity"),
                    "changed": pc.invert(example.field("removed")),
                },
                schema=CANDIDATES,
            )
        )
    if not parts:
        return None
    return choose(pa.concat_tables(parts), k)


def attach(stage: Stage, before: pa.RecordBatch, removed: pa.Table, k: int) -> pa.Table:
    """`removed` (rows `stage` removed from `before`) with the `example` column: per
    reason, the k rows of smallest id hash get their text, the others null."""
    ids = removed.column(ID).to_pylist()
    reasons = removed.column("reason").to_pylist()
    rows = smallest([(r, id_hash(i), i) for r, i in zip(reasons, ids, strict=True)], k)
    values: list[dict[str, object] | None] = [None] * removed.num_rows
    if rows:
        wanted = pa.array([ids[i] for i in rows], pa.string())
        where = pc.index_in(wanted, value_set=before.column(ID))
        texts = stage.document_texts(before.take(where)).to_pylist()
        clipped = [clip(t) for t in texts]
        shown = getattr(stage, "shown", None)
        if shown is not None:  # a pii stage's own removals: never kept with their values,
            clipped = shown(clipped)  # not even in staging or the stage cache
        for i, text, kept in zip(rows, texts, clipped, strict=True):
            values[i] = {
                "position": stage.context.position,
                "text": kept,
                "characters": len(text) if text is not None else 0,
                "removed": True,
            }
    return removed.append_column(COLUMN, pa.array(values, TYPE))


def offer(
    stage: Stage,
    found: Sequence[tuple[str, str]],
    shown: Callable[[str, str], tuple[str, int]],
    k: int,
) -> pa.Table | None:
    """Examples of what `stage` changed without removing: `found` holds (id, reason) pairs,
    and `shown(id, reason)` gives the text to show and the document's whole length, asked
    only for the k pairs per reason of smallest id hash. Rows shaped as removed rows (the
    `example` column's `removed` false), so they travel with them; `removed_rows` leaves
    them out of rejected/.

    Every pair gets a row, in `found`'s order; those not chosen carry no text
    (`characters` -1: `NOT_SHOWN`), so what was found in each document stays known to
    whoever holds the rows (a rerun that reuses documents one by one chooses again among
    them: `curate.cache.by_document`), and `candidates` leaves them out."""
    if not found:
        return None
    chosen = set(smallest([(r, id_hash(i), i) for i, r in found], k))
    values: list[dict[str, object]] = []
    for i, (doc, reason) in enumerate(found):
        text, characters = shown(doc, reason) if i in chosen else (None, NOT_SHOWN)
        values.append({"position": stage.context.position, "text": text,
                       "characters": characters, "removed": False})  # fmt: skip
    n = len(found)
    return pa.table(
        {
            "id": pa.array([doc for doc, _ in found], pa.string()),
            "stage": pa.array([stage.name] * n, pa.string()),
            "reason": pa.array([reason for _, reason in found], pa.string()),
            "duplicate_of": pa.nulls(n, pa.string()),
            "similarity": pa.nulls(n, pa.float32()),
            COLUMN: pa.array(values, TYPE),
        }
    )


def around(text: str, marker: str) -> str:
    """At most `SHOWN` characters of `text`, from a little before the first `marker` (what
    an example of a change is about may lie past the first `SHOWN` characters)."""
    at = text.find(marker)
    start = max(0, at - SHOWN // 5) if at >= 0 else 0
    return ("…" if start else "") + text[start : start + SHOWN]


def removed_rows(table: pa.Table) -> pa.Table:
    """The rows of documents really removed (for rejected/): without the `example` column,
    and without the rows a stage only offered as examples of a change."""
    if COLUMN not in table.column_names:
        return table
    example = table.column(COLUMN)
    offered = pc.and_(example.is_valid(), pc.invert(pc.struct_field(example, "removed")))
    kept = table.filter(pc.invert(pc.fill_null(offered, False)))
    return kept.drop_columns([COLUMN])

"""Collective operations on a Ray cluster, for barrier decisions that do not fit one node.

The summaries stay where the workers spilled them: one Arrow file per partition in the
staging folder, which every node mounts. Grouping by key is a hash shuffle through Ray's
object store (`exchange`): reading tasks send each row's key and `_order` to the task
that owns its bucket, which decides for its keys alone. Fetching values for pairs reads
only the rows the pairs name, from the files that hold them. The driver holds object
references and the operations' results (drops, edges, components), never the summaries.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import ray

from curate.engines.collective import PairScore, Summaries
from curate.engines.local_collective import EDGES_SCHEMA, LocalSummaries, sorted_unique
from curate.engines.ray.exchange import (
    PART_SHIFT,
    call,
    concat,
    exchange,
    hash_buckets,
    key_hash,
    range_buckets,
    read_columns,
    rows_of,
    runs,
    split,
    unique_pairs,
)
from curate.io.batches import ID
from curate.stages.base import ORDER

FIRSTS_SCHEMA = pa.schema(
    [pa.field("id", pa.string()), pa.field(ORDER, pa.uint64()), pa.field("first_id", pa.string())]
)
SLOT = "_slot"


class RaySummaries(Summaries):
    """Summary rows in spilled files on the shared filesystem, worked on by Ray tasks."""

    bucket_bytes = 128 << 20
    """Shuffled bytes each reduce task aims to hold."""
    map_buckets = 8
    """A reading task sends at most this many buckets' worth (about 1 GB)."""
    value_budget = 256 << 20
    """Bytes of fetched values a scoring task aims to hold (as `LocalSummaries.value_budget`)."""

    def __init__(self, files: list[tuple[Path, int]], cpus: int | None = None) -> None:
        """`files`: each summary file with the partition whose rows it holds."""
        self.files = [f for f, _ in sorted(files, key=lambda fp: (fp[1], str(fp[0])))]
        self.partitions = [p for _, p in sorted(files, key=lambda fp: (fp[1], str(fp[0])))]
        self.cpus = cpus or max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._rows: list[int] | None = None

    def rows(self) -> list[int]:
        """Rows per file, counted by Ray tasks (the driver opens no summary file)."""
        if self._rows is None:
            n = max(1, min(len(self.files), self.cpus))
            groups = [list(g) for g in np.array_split(np.array(self.files, dtype=object), n)]
            counted = ray.get([call(_row_counts, (g,))[0] for g in groups if len(g)])
            self._rows = [c for counts in counted for c in counts]
        return self._rows

    def count(self) -> int:
        return sum(self.rows())

    def buckets(self, row_bytes: int) -> int:
        volume = self.count() * row_bytes
        return max(1, min(4096, max(self.cpus, math.ceil(volume / self.bucket_bytes))))

    def groups(self, row_bytes: int) -> list[list[Path]]:
        """Files per reading task, in input order: one task per CPU at least, and enough that
        none sends more than `map_buckets` buckets' worth. Every reading task sends a piece to
        every bucket, so there are groups x buckets objects: fewer, larger reading tasks keep
        that number (the driver owns every one) in the hundreds of thousands at 10^9 rows."""
        volume = self.count() * row_bytes
        n = max(self.cpus, math.ceil(volume / (self.map_buckets * self.bucket_bytes)))
        n = min(len(self.files), n)
        return [list(g) for g in np.array_split(np.array(self.files, dtype=object), n) if len(g)]

    def _max_partition(self) -> int:
        return max(self.partitions, default=0) + 1

    # -- group by key -------------------------------------------------------------------

    def repeated_id(self) -> str | None:
        """The smallest id held by two rows, found by shuffling ids (not by collecting them)."""
        if not self.files:
            return None
        row_bytes = 56  # id
        buckets = self.buckets(row_bytes)
        sent = [call(_scatter_ids, (g, buckets), outputs=buckets) for g in self.groups(row_bytes)]
        found = [r for r in ray.get([r[0] for r in exchange(sent, _repeated, ())]) if r]
        return min(found) if found else None

    def first_by_key(self, key: str) -> pa.Table:
        if not self.files:
            return FIRSTS_SCHEMA.empty_table()
        row_bytes = 64  # key, id, `_order`
        buckets = self.buckets(row_bytes)
        sent = [
            call(_scatter_keys, (g, key, buckets), outputs=buckets) for g in self.groups(row_bytes)
        ]
        found = ray.get([r[0] for r in exchange(sent, _firsts, (key,))])
        return concat(found).sort_by(ORDER).cast(FIRSTS_SCHEMA)

    def star_edges(self, keys: list[str]) -> pa.Table:
        if not self.files or not keys:
            return EDGES_SCHEMA.empty_table()
        schema = pa.ipc.open_file(pa.memory_map(str(self.files[0]))).schema
        by_type: dict[str, list[str]] = {}
        for key in keys:  # one shuffle per key type (all of MinHash's bands are uint64)
            by_type.setdefault(str(schema.field(key).type), []).append(key)
        tables = []
        for same in by_type.values():
            row_bytes = 18 * len(same)  # per key: slot, key, `_order`
            buckets = self.buckets(row_bytes)
            sent = [
                call(_scatter_slots, (g, same, buckets), outputs=buckets)
                for g in self.groups(row_bytes)
            ]
            stars = exchange(sent, _stars, (buckets, self._max_partition()), outputs=buckets)
            tables += ray.get([r[0] for r in exchange(stars, _unique_edges, ())])
        edges = concat(tables)
        if len(by_type) > 1:
            a, b = unique_pairs(edges.column("a").to_numpy(), edges.column("b").to_numpy())
            edges = pa.table({"a": a, "b": b})
        return edges.cast(EDGES_SCHEMA) if edges.num_rows else EDGES_SCHEMA.empty_table()

    # -- values of named rows -----------------------------------------------------------

    def _fetch(self, chunks: list[np.ndarray], columns: list[str]) -> list[list[ray.ObjectRef]]:
        """Per chunk of sorted `_order` values, references to the rows found for it.

        Partitions are read in ranges, one reading task per CPU at most, each returning one
        piece per chunk: reading tasks x chunks objects, whatever the number of partitions.
        """
        present = sorted(set(self.partitions))
        ranges = np.array_split(np.array(present), min(len(present), self.cpus))
        starts = np.array([int(r[0]) for r in ranges], np.int64)
        files: list[list[Path]] = [[] for _ in ranges]
        for p, f in zip(self.partitions, self.files, strict=True):
            files[int(np.searchsorted(starts, p, side="right")) - 1].append(f)
        needs: dict[int, list[np.ndarray]] = {}
        for c, nodes in enumerate(chunks):
            parts = (nodes >> PART_SHIFT).astype(np.int64)
            if len(nodes) and not np.isin(parts, present).all():
                raise ValueError("score_pairs/lookup: rows not in the summaries")
            group = np.searchsorted(starts, parts, side="right") - 1  # nodes sorted: runs
            cuts = np.flatnonzero(np.concatenate([[True], group[1:] != group[:-1]]))
            for s, e in zip(cuts, [*cuts[1:], len(nodes)], strict=True):
                empty = [np.zeros(0, np.uint64)] * len(chunks)
                needs.setdefault(int(group[s]), empty)[c] = nodes[s:e]
        per_chunk: list[list[ray.ObjectRef]] = [[] for _ in chunks]
        for g, wanted in sorted(needs.items()):
            refs = call(_rows, (files[g], columns, wanted), outputs=len(chunks))
            for c, ref in enumerate(refs):
                if len(wanted[c]):
                    per_chunk[c].append(ref)
        return per_chunk

    def score_pairs(self, pairs: pa.Table, column: str, score: PairScore) -> np.ndarray:
        """Pairs in chunks of about `value_budget` bytes of values, chunks in waves of one per
        CPU, so the objects alive at once stay (reading tasks x CPUs) at any size."""
        a = pairs.column("a").to_numpy().astype(np.uint64)
        b = pairs.column("b").to_numpy().astype(np.uint64)
        out = np.zeros(len(a), np.float64)
        if not len(a):
            return out
        row_bytes = max(1, sum(f.stat().st_size for f in self.files) // max(1, self.count()))
        step = max(1, self.value_budget // (2 * row_bytes))
        by_first = np.argsort(a, kind="stable")
        chunks = [by_first[s : s + step] for s in range(0, len(a), step)]
        for w in range(0, len(chunks), self.cpus):
            wave = chunks[w : w + self.cpus]
            nodes = [sorted_unique(np.concatenate([a[c], b[c]])) for c in wave]
            fetched = self._fetch(nodes, [column])
            scored = [
                call(_score, (score, column, a[c], b[c], len(n)), refs)[0]
                for c, n, refs in zip(wave, nodes, fetched, strict=True)
            ]
            for c, values in zip(wave, ray.get(scored), strict=True):
                out[c] = values
        return out

    def connected_components(self, edges: pa.Table) -> pa.Table:
        # The edges are already here (the contract hands them over as a table) and take
        # ~16 bytes each; components over them need no more than a few times that.
        return LocalSummaries([]).connected_components(edges)

    def lookup(self, orders: pa.Array, columns: list[str]) -> pa.Table:
        wanted = sorted_unique(np.asarray(orders, dtype=np.uint64))
        if not self.files:
            raise ValueError("lookup: no summaries")
        found = ray.get(self._fetch([wanted], columns)[0])
        return concat(found).sort_by(ORDER) if found else _empty_rows(self.files[0], columns)


def _empty_rows(path: Path, columns: list[str]) -> pa.Table:
    return read_columns(path, [ORDER, *columns]).slice(0, 0)


# -- task bodies (run in Ray workers) ---------------------------------------------------


def _row_counts(_: list[object], files: list[Path]) -> list[list[int]]:
    counts = []
    for f in files:
        reader = pa.ipc.open_file(pa.memory_map(str(f)))
        counts.append(sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches)))
    return [counts]


def _scatter_keys(_: list[object], files: list[Path], key: str, buckets: int) -> list[pa.Table]:
    table = concat([read_columns(f, [key, ID, ORDER]) for f in files])
    table = table.filter(pc.is_valid(table.column(key)))  # a null key equals no other
    return split(table, hash_buckets(key_hash(table.column(key)), buckets), buckets)


def _scatter_ids(_: list[object], files: list[Path], buckets: int) -> list[pa.Table]:
    table = concat([read_columns(f, [ID]) for f in files])
    return split(table, hash_buckets(key_hash(table.column(ID)), buckets), buckets)


def _repeated(parts: list[pa.Table]) -> list[str | None]:
    ids = concat(parts)
    if ids.num_rows < 2:
        return [None]
    ids = ids.sort_by(ID)
    again = ~runs(ids, [ID])
    return [ids.column(ID)[int(np.argmax(again))].as_py() if again.any() else None]


def _firsts(parts: list[pa.Table], key: str) -> list[pa.Table]:
    """For each key in this bucket, its rows after the first in input order."""
    rows = concat(parts)
    if rows.num_rows == 0:
        return [FIRSTS_SCHEMA.empty_table()]
    rows = rows.take(pc.sort_indices(rows, [(key, "ascending"), (ORDER, "ascending")]))
    new = runs(rows, [key])
    first_row = np.flatnonzero(new)[np.cumsum(new) - 1]
    later = pa.array(~new)
    ids = rows.column(ID).combine_chunks()
    table = pa.table(
        {
            "id": ids.filter(later),
            ORDER: rows.column(ORDER).filter(later),
            "first_id": ids.take(pa.array(first_row)).filter(later),
        }
    )
    return [table.cast(FIRSTS_SCHEMA)]


def _scatter_slots(
    _: list[object], files: list[Path], keys: list[str], buckets: int
) -> list[pa.Table]:
    """(slot, key, `_order`) rows for every non-null key of every key column."""
    pieces = []
    for f in files:
        table = read_columns(f, [*keys, ORDER])
        for slot, key in enumerate(keys):
            col = table.column(key)
            valid = pc.is_valid(col)
            pieces.append(
                pa.table(
                    {
                        SLOT: pa.array(np.full(pc.sum(valid).as_py() or 0, slot, np.uint16)),
                        "key": col.filter(valid),
                        ORDER: table.column(ORDER).filter(valid),
                    }
                )
            )
    rows = concat(pieces)
    hashes = key_hash(rows.column("key")) ^ (rows.column(SLOT).to_numpy().astype(np.uint64) << 48)
    return split(rows, hash_buckets(hashes, buckets), buckets)


def _stars(parts: list[pa.Table], buckets: int, partitions: int) -> list[pa.Table]:
    """Edges from each (slot, key) group's first row to the others, sent on by range of `a`."""
    rows = concat(parts)
    empty = [EDGES_SCHEMA.empty_table()] * buckets
    if rows.num_rows == 0:
        return empty
    by = [(SLOT, "ascending"), ("key", "ascending"), (ORDER, "ascending")]
    rows = rows.take(pc.sort_indices(rows, by))
    new = runs(rows, [SLOT, "key"])
    order = rows.column(ORDER).to_numpy()
    first = order[np.flatnonzero(new)[np.cumsum(new) - 1]]
    later = ~new
    a, b = unique_pairs(first[later], order[later])
    if not len(a):
        return empty
    edges = pa.table({"a": a, "b": b}, schema=EDGES_SCHEMA)
    return split(edges, range_buckets(a, buckets, partitions), buckets)


def _unique_edges(parts: list[pa.Table]) -> list[pa.Table]:
    edges = concat(parts)
    if edges.num_rows == 0:
        return [EDGES_SCHEMA.empty_table()]
    a, b = unique_pairs(edges.column("a").to_numpy(), edges.column("b").to_numpy())
    return [pa.table({"a": a, "b": b}, schema=EDGES_SCHEMA)]


def _rows(
    _: list[object], paths: list[Path], columns: list[str], needs: list[np.ndarray]
) -> list[pa.Table]:
    """Rows of these files for each chunk of wanted `_order` values (one read for all)."""
    wanted = np.concatenate(needs)
    found = concat([rows_of(path, columns, wanted) for path in paths])
    have = found.column(ORDER).to_numpy()
    return [found.filter(pa.array(np.isin(have, n))) for n in needs]


def _score(
    parts: list[pa.Table],
    score: PairScore,
    column: str,
    a: np.ndarray,
    b: np.ndarray,
    expected: int,
) -> list[np.ndarray]:
    found = concat(parts).sort_by(ORDER)
    have = found.column(ORDER).to_numpy()
    if len(have) != expected:
        raise ValueError(f"score_pairs: {expected - len(have)} rows not in summaries")
    values = found.column(column).combine_chunks()
    return [score(values, np.searchsorted(have, a), np.searchsorted(have, b))]

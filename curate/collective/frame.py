"""The collective operations a barrier's global decision is written against.

A barrier decides over tables no single process may be able to hold: its summaries, the
candidate pairs they produce, the clusters, the decision itself. Every engine therefore
hands out `Frame`s, handles to a table it keeps in pieces where it likes (the local engine
in this process or in spilled files, a cluster engine in its object store), and provides
a few primitives over them: run a function on each piece, bring rows with equal keys
together (a hash shuffle), bring rows to the data partition their `_order` points into (a
range shuffle, which is also how a decision reaches the partition it concerns), and fold
each piece to a small value for the driver. The operations barriers use (first row per
key, candidate pairs, pair scores, connected components, joins by `_order`) are written
once, here and in `curate.collective.components`, from those primitives and the pure piece
functions in `curate.collective.piece_ops`; so every engine runs the same code on the same
rows, and only the placement of pieces differs.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from curate.collective import piece_ops
from curate.io.batches import ID, ORDER

PairScore = Callable[[pa.Array, np.ndarray, np.ndarray], np.ndarray]
"""score(values, left, right): one float per pair; `values` holds a column of each row the
pairs name, and `left`/`right` index into it. A pure, picklable function."""

PieceFn = Callable[..., pa.Table]
"""fn(piece, *args) -> table: pure and picklable (a module-level function), since an engine
may run it in another process, or twice."""

Prepare = tuple[PieceFn, tuple[Any, ...]] | None
"""A piece function (and its arguments) applied to each piece before it is shuffled."""

Side = Callable[[int, int], Any] | None
"""side(lo, hi): what a range-shuffled piece needs besides its rows (the summary files of
partitions lo..hi-1), made by the driver for each piece."""


class Frame(ABC):
    """A table an engine holds in pieces; the caller holds only this handle."""

    partitions: int
    """Data partitions the `_order` values point into (the largest index, plus one)."""

    @abstractmethod
    def map(self, fn: PieceFn, *args: Any) -> Frame:
        """`fn(piece, *args)` on every piece; pieces keep their place."""

    @abstractmethod
    def group(
        self, key: str, fn: PieceFn, *args: Any, prepare: Prepare = None, row_bytes: int = 0
    ) -> Frame:
        """Rows with equal `key` (after `prepare`) brought into one piece, then `fn(piece,
        *args)` on each. `row_bytes`: bytes per input row after `prepare`, when it grows rows
        (0: measure the pieces)."""

    @abstractmethod
    def by_partition(
        self,
        column: str,
        fn: PieceFn,
        *args: Any,
        prepare: Prepare = None,
        side: Side = None,
        row_bytes: int = 0,
    ) -> Frame:
        """Rows brought to the piece of the data partition their `column` (an `_order` value)
        points into; each piece covers a range of partitions, pieces in partition order.
        Then `fn(piece, (lo, hi), side(lo, hi) or None, *args)` on each."""

    @abstractmethod
    def fold(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        """`fn(piece, *args)` for every piece, returned to the caller: keep it small."""

    def count(self) -> int:
        return int(sum(self.fold(piece_ops.num_rows)))

    def collect(self, schema: pa.Schema) -> pa.Table:
        """The whole table in this process: for small data and tests only."""
        tables = [t for t in self.fold(piece_ops.identity) if t.num_rows]
        return pa.concat_tables(tables).cast(schema) if tables else schema.empty_table()


class Summaries(ABC):
    """All summary rows of one barrier stage, as the engine holds them."""

    @abstractmethod
    def rows(self, columns: list[str]) -> Frame:
        """These columns of every summary row, in pieces of the engine's choosing."""

    @abstractmethod
    def sources(self, lo: int, hi: int) -> list[Any]:
        """The summaries of data partitions lo..hi-1, as `piece_ops.join_rows` reads them."""

    def close(self) -> None:
        """Let go of what the operations spilled (the engine's own files)."""
        return None

    def count(self) -> int:
        """Number of summary rows."""
        return self.rows([ORDER]).count()

    def repeated_id(self) -> str | None:
        """An id carried by more than one summary row, if any (ids must be unique, since
        decisions are joined back on them); found by a shuffle of ids, not by collecting them."""
        found = self.rows([ID]).group(ID, piece_ops.repeated_ids).fold(piece_ops.first_value)
        found = [f for f in found if f is not None]
        return min(found) if found else None

    def first_by_key(self, key: str) -> Frame:
        """Rows whose `key` equals the key of an earlier row in input order (a null key
        equals no other): `id`, `_order` (of the later row) and `first_id` (the id of the
        earliest row with that key). Ties cannot happen: `_order` is unique."""
        rows = self.rows([key, ID, ORDER])
        return rows.group(key, piece_ops.firsts, key, prepare=(piece_ops.valid_keys, (key,)))

    def star_edges(self, keys: list[str]) -> Frame:
        """Candidate pairs of rows that share a key, for each key column in turn.

        For every value held by two or more rows (nulls are no value), an edge from the
        earliest of those rows in input order to each of the others: columns `a` and `b`
        (uint64 `_order` values, a < b), each pair once however many keys produce it, in
        pieces by the partition of `a`. A star rather than every pair keeps the edges per
        key below the number of rows. The key columns must share one type.
        """
        rows = self.rows([*keys, ORDER])
        stars = rows.group(
            piece_ops.SLOT_HASH,
            piece_ops.stars,
            prepare=(piece_ops.slots, (keys,)),
            row_bytes=26 * len(keys),
        )
        return stars.by_partition("a", piece_ops.unique_edges)

    def join(
        self, frame: Frame, on: str, columns: list[str], names: list[str], row_bytes: int = 0
    ) -> Frame:
        """`frame` with `columns` of the summary row whose `_order` is its `on` value, named
        `names`; in pieces by the partition of `on`. Every `on` value must name a row."""
        return frame.by_partition(
            on, piece_ops.join_rows, on, columns, names, side=self.sources, row_bytes=row_bytes
        )

    def score_pairs(self, pairs: Frame, column: str, score: PairScore) -> Frame:
        """`pairs` (`a`, `b` as `_order` values) with a float64 `score`: `score` applied to
        `column` of both rows, which are read for the pairs' rows only."""
        each = self.value_bytes(column)
        with_a = self.join(pairs, "a", [column], ["_va"], row_bytes=16 + each)
        both = self.join(with_a, "b", [column], ["_vb"], row_bytes=16 + 2 * each)
        return both.map(piece_ops.score, score)

    def value_bytes(self, column: str) -> int:
        """Average bytes of `column` per summary row (from the pieces' buffers)."""
        n = self.count()
        return math.ceil(sum(self.rows([column]).fold(piece_ops.nbytes)) / n) if n else 0

    def connected_components(self, edges: Frame) -> Frame:
        """For every row an edge (`a`, `b`) names: `node` and `root`, the smallest `_order`
        in its connected component; in pieces by the partition of `node`, sorted by it."""
        from curate.collective.components import connected_components

        return connected_components(edges)

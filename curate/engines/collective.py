"""The collective operations a barrier's global decision is written against.

Every engine provides these over the summaries its workers produced: the local
engine with polars over Arrow files in the staging folder, a cluster engine with
its own shuffle. A barrier stage never sees where the rows live, so one
implementation of each barrier serves every engine.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

import numpy as np
import pyarrow as pa

PairScore = Callable[[pa.Array, np.ndarray, np.ndarray], np.ndarray]
"""score(values, left, right): one float per pair; `values` holds a column of each row the
pairs name, once, and `left`/`right` index into it. A pure, picklable function."""


class Summaries(ABC):
    """All summary rows of one barrier stage, as the engine holds them."""

    @abstractmethod
    def first_by_key(self, key: str) -> pa.Table:
        """Rows whose `key` equals the key of an earlier row in input order.

        Returns columns `id`, `_order` (of the later row) and `first_id` (the id of the
        earliest row with that key). Ties in input order cannot happen: `_order` is unique.
        """

    def repeated_id(self) -> str | None:
        """An id carried by more than one summary row, if any (ids must be unique, since
        decisions are joined back on them). Engines that cannot check cheaply return None."""
        return None

    @abstractmethod
    def count(self) -> int:
        """Number of summary rows."""

    @abstractmethod
    def star_edges(self, keys: list[str]) -> pa.Table:
        """Candidate pairs of rows that share a key, for each key column in turn.

        For every value held by two or more rows (nulls are no value), an edge from the
        earliest of those rows in input order to each of the others: columns `a` and `b`
        (uint64 `_order` values, a < b), each pair once however many keys produce it. A
        star rather than every pair keeps the edges per key below the number of rows.
        """

    @abstractmethod
    def score_pairs(self, pairs: pa.Table, column: str, score: PairScore) -> np.ndarray:
        """`score` applied to `column` of both rows of every pair (`a`, `b` as `_order`
        values); float64, aligned with `pairs`. Engines fetch the column for the rows the
        pairs name only, in pieces of bounded size."""

    @abstractmethod
    def connected_components(self, edges: pa.Table) -> pa.Table:
        """For every row an edge (`a`, `b`) names: `node` and `root`, the smallest `_order`
        in its connected component, sorted by `node`."""

    @abstractmethod
    def lookup(self, orders: pa.Array, columns: list[str]) -> pa.Table:
        """`_order` and `columns` of the rows with these `_order` values, sorted by `_order`."""

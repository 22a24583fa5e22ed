"""The collective operations a barrier's global decision is written against.

Every engine provides these over the summaries its workers produced: the local
engine with polars over Arrow files in the staging folder, a cluster engine with
its own shuffle. A barrier stage never sees where the rows live, so one
implementation of each barrier serves every engine.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import pyarrow as pa


class Summaries(ABC):
    """All summary rows of one barrier stage, as the engine holds them."""

    @abstractmethod
    def first_by_key(self, key: str) -> pa.Table:
        """Rows whose `key` equals the key of an earlier row in input order.

        Returns columns `id`, `_order` (of the later row) and `first_id` (the id of the
        earliest row with that key). Ties in input order cannot happen: `_order` is unique.
        """

    @abstractmethod
    def count(self) -> int:
        """Number of summary rows."""

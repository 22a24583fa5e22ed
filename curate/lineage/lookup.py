"""Reading a version's lineage side table back: one document by id without reading the rest.

`ids.arrow` is memory-mapped and binary-searched (a few pages of it are read, however large
the version); the document's row of `documents.arrow` is in one compressed batch, the only
one decoded. The paths come from the manifest and are checked to stay inside the version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from curate.errors import CurateError
from curate.lineage.table import BATCH_ROWS, DOCUMENTS, DOCUMENTS_SCHEMA, IDS, id_hash
from curate.paths import inside

if TYPE_CHECKING:
    from curate.version import Version


class Lineage:
    """A published version's lineage: where each written document came from and where it is."""

    def __init__(self, version: Version) -> None:
        records = version.manifest.get("lineage")
        if not records:
            raise CurateError(
                f"{version.path} has no lineage (made by a curate before lineage): build it "
                "again to trace its documents"
            )
        source = version.path / "manifest.json"
        paths = {}
        for i, record in enumerate(records):
            paths[record.get("path")] = inside(
                version.path, record.get("path"), source=source, field=f"lineage[{i}].path"
            )
        if DOCUMENTS not in paths or IDS not in paths:
            raise CurateError(f"{source}: lineage lists no {DOCUMENTS} and {IDS}")
        self.version = version
        self._documents = pa.ipc.open_file(pa.memory_map(str(paths[DOCUMENTS])))
        ids = pa.ipc.open_file(pa.memory_map(str(paths[IDS])))
        if ids.num_record_batches:
            batch = ids.get_batch(0)
            self._hashes = _view(batch.column(0))  # zero-copy views of the mapped file
            self._positions = _view(batch.column(1))
        else:
            self._hashes = self._positions = np.empty(0, np.uint64)

    @property
    def documents(self) -> int:
        return len(self._hashes)

    def positions(self, doc_id: str) -> list[int]:
        """Rows of documents.arrow holding this id (one, unless the inputs repeat ids)."""
        h = np.uint64(id_hash(doc_id))
        lo = int(np.searchsorted(self._hashes, h, side="left"))
        hi = int(np.searchsorted(self._hashes, h, side="right"))
        found = sorted(int(p) for p in self._positions[lo:hi])
        return [p for p in found if self.row(p)["id"] == doc_id]  # a hash shared by two ids

    def row(self, position: int) -> dict[str, Any]:
        """One row of documents.arrow: shard, row, start, id, input, line, offset."""
        if not 0 <= position < self.documents:
            raise CurateError(f"lineage has no row {position}")
        batch = self._documents.get_batch(position // BATCH_ROWS)
        return batch.slice(position % BATCH_ROWS, 1).to_pylist()[0]

    def find(self, doc_id: str) -> list[dict[str, Any]]:
        return [self.row(p) for p in self.positions(doc_id)]

    def table(self) -> pa.Table:
        """The whole table (every batch decoded): for scans, never for one lookup."""
        if not self._documents.num_record_batches:
            return DOCUMENTS_SCHEMA.empty_table()
        return self._documents.read_all()


def _view(column: pa.Array) -> np.ndarray:
    """An unsigned integer column without nulls as a numpy view of its buffer (no copy, and
    none of the imports `to_numpy` makes)."""
    dtype = np.dtype(np.uint32 if column.type == pa.uint32() else np.uint64)
    data = column.buffers()[1]
    return np.frombuffer(data, dtype, count=len(column), offset=column.offset * dtype.itemsize)

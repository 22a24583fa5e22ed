"""What a partition's shard writer keeps of each document it writes: its id and place in
its input, staged beside the partition's record for publish to turn into the version's
lineage side table (`curate.lineage`).

The rows reach the shard writer with the hidden `_line`/`_offset` columns the reader made
(`curate.io.batches.LOCATION`); shards never hold them. The kept rows are flushed to a
file whenever the writer hands back its completed shards (at each checkpoint and at the
end), so a resumed partition continues with the same files, numbered on from its record's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from curate.io.batches import CHANGED, ID, LINE, OFFSET, PII_FOUND
from curate.output.shards import write_table

STAGED_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string()),
        pa.field("line", pa.int64()),
        pa.field("offset", pa.int64()),
        pa.field("changed", pa.uint64()),
        pa.field("pii", pa.string()),
    ]
)
"""What a partition stages per document it wrote, in the order it wrote them."""


def staged_rows(rows: pa.RecordBatch) -> pa.RecordBatch:
    """A batch's documents as lineage keeps them (null places when the rows carry none)."""
    n, names = rows.num_rows, rows.schema.names
    columns = [rows.column(ID).cast(pa.string())]
    hidden = (LINE, OFFSET, CHANGED, PII_FOUND)
    for name, field in zip(hidden, list(STAGED_SCHEMA)[1:], strict=True):
        columns.append(rows.column(name) if name in names else pa.nulls(n, field.type))
    return pa.RecordBatch.from_arrays(columns, schema=STAGED_SCHEMA)


class StagedLineage:
    """One partition's lineage rows, per split, flushed to numbered files on `flush`."""

    def __init__(
        self,
        folder: Path,
        partition: str,
        *,
        done: int = 0,
        fsync: bool = True,
        file_mode: int = 0o640,
        relative_to: Path | None = None,
    ) -> None:
        self.folder, self.partition = folder, partition
        self.count = done  # files written, a resumed partition's included
        self.fsync, self.file_mode, self.relative_to = fsync, file_mode, relative_to
        self.held: dict[str | None, list[pa.RecordBatch]] = {}
        self.files: list[dict[str, Any]] = []

    def add(self, split: str | None, rows: pa.RecordBatch) -> None:
        if rows.num_rows:
            self.held.setdefault(split, []).append(staged_rows(rows))

    def flush(self) -> None:
        for split, batches in self.held.items():
            table = pa.Table.from_batches(batches, STAGED_SCHEMA)
            name = f"lineage-{self.partition}-{self.count:05d}.arrow"
            info = write_table(self.folder / name, table, fsync=self.fsync,
                               file_mode=self.file_mode, relative_to=self.relative_to)  # fmt: skip
            self.files.append(info.to_dict() | ({"split": split} if split else {}))
            self.count += 1
        self.held = {}

    def take(self) -> list[dict[str, Any]]:
        files, self.files = self.files, []
        return files

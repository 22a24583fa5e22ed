"""Staged data between passes, cut into segments that each complete on their own.

A pass that ends at a barrier writes the surviving rows and their summaries in
segments of about the shard size (`data-KKKK-SSSSS.arrow` and `summary-KKKK-SSSSS.arrow`,
see `curate.staging.names`),
so an interrupted pass resumes after its last complete segment, as a final pass does
after its last complete shard.

When the rows are already on disk elsewhere (`curate.engines.staged_rows`: a stage cache
entry holding exactly them, or the previous pass's rows less a decision), only the
summaries are written: a segment then names its summary file and its row count.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from curate.io.batches import local_orders
from curate.output.shards import ShardInfo, ShardWriter
from curate.staging.names import DATA, Staging


class SegmentWriter:
    """Rows for the next pass and their barrier summaries, in segments that close together."""

    def __init__(
        self,
        staging: Staging,
        pass_index: int,
        partition: str,
        target_bytes: int,
        *,
        fsync: bool,
        rows: bool = True,
    ):
        self.staging = staging
        self.pass_index = pass_index
        self.partition = partition
        self.target_bytes = target_bytes
        self.fsync = fsync
        self.segments: list[dict[str, Any]] = []
        self._data: ShardWriter | None = None
        self._summary: pa.ipc.RecordBatchFileWriter | None = None
        self._summary_path: Path | None = None
        self.rows = rows  # False: the rows are not written (they are kept elsewhere)
        self._held = 0  # rows and bytes of the open segment, when they are not written
        self._held_bytes = 0

    def write(self, batch: pa.RecordBatch, summary: pa.RecordBatch) -> None:
        if not self.rows:
            self._write_summary(summary)
            self._held += batch.num_rows
            self._held_bytes += batch.nbytes
            if self._held_bytes >= self.target_bytes:
                self.close_segment()
            return
        if self._data is None:
            self._data = ShardWriter(
                self.staging.pass_dir(self.pass_index), self.partition, batch.schema, 1 << 62,
                prefix=DATA, fsync=self.fsync, relative_to=self.staging.root,
                first_index=len(self.segments), checksum=False,
            )  # fmt: skip
        self._data.write(local_orders(batch))  # the run's partition index is not kept
        self._write_summary(summary)
        if self._data.bytes_written >= self.target_bytes:
            self.close_segment()

    def _write_summary(self, summary: pa.RecordBatch) -> None:
        if self._summary is None:
            self._summary_path = self.staging.summary(
                self.pass_index, self.partition, len(self.segments)
            )
            self._summary = pa.ipc.new_file(str(self._summary_path), summary.schema)
        self._summary.write_batch(local_orders(summary))

    def _close_summary(self) -> dict[str, Any]:
        assert self._summary is not None and self._summary_path is not None
        self._summary.close()
        path = self._summary_path
        self._summary = self._summary_path = None
        return {"path": self.staging.relative(path), "bytes": path.stat().st_size}

    def close_segment(self) -> None:
        if not self.rows:
            if self._summary is not None:
                self.segments.append({"summary": self._close_summary(), "rows": self._held})
            self._held = self._held_bytes = 0
            return
        if self._data is None or self._summary is None:
            return
        data: list[ShardInfo] = self._data.close()
        self.segments.append({"data": data[0].to_dict(), "summary": self._close_summary()})
        self._data = None

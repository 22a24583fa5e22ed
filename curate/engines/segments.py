"""Staged data between passes, cut into segments that each complete on their own.

A pass that ends at a barrier writes the surviving rows and their summaries in
segments of about the shard size (`data-PPPPP-SSSSS.arrow` and `summary-PPPPP-SSSSS.arrow`),
so an interrupted pass resumes after its last complete segment, as a final pass does
after its last complete shard.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from curate.output.shards import ShardInfo, ShardWriter, read_stream


class SegmentWriter:
    """Rows for the next pass and their barrier summaries, in segments that close together."""

    def __init__(
        self, folder: Path, partition: int, target_bytes: int, staging: Path, *, fsync: bool
    ):
        self.folder = folder
        self.partition = partition
        self.target_bytes = target_bytes
        self.staging = staging
        self.fsync = fsync
        self.segments: list[dict[str, Any]] = []
        self._data: ShardWriter | None = None
        self._summary: pa.ipc.RecordBatchFileWriter | None = None
        self._summary_path: Path | None = None

    def write(self, batch: pa.RecordBatch, summary: pa.RecordBatch) -> None:
        if self._data is None:
            self._data = ShardWriter(
                self.folder, self.partition, batch.schema, 1 << 62,
                prefix="data", fsync=self.fsync, relative_to=self.staging,
                first_index=len(self.segments), checksum=False,
            )  # fmt: skip
            name = f"summary-{self.partition:05d}-{len(self.segments):05d}.arrow"
            self._summary_path = self.folder / name
            self._summary = pa.ipc.new_file(str(self._summary_path), summary.schema)
        assert self._summary is not None
        self._data.write(batch)
        self._summary.write_batch(summary)
        if self._data.bytes_written >= self.target_bytes:
            self.close_segment()

    def close_segment(self) -> None:
        if self._data is None or self._summary is None or self._summary_path is None:
            return
        self._summary.close()
        data: list[ShardInfo] = self._data.close()
        summary_path = self._summary_path
        self.segments.append(
            {
                "data": data[0].to_dict(),
                "summary": {
                    "path": summary_path.relative_to(self.staging).as_posix(),
                    "bytes": summary_path.stat().st_size,
                },
            }
        )
        self._data = self._summary = self._summary_path = None

    @property
    def open(self) -> bool:
        return self._data is not None


def staged_batches(staging: Path, segments: list[dict[str, Any]]) -> list[pa.Table]:
    return [read_stream(staging / s["data"]["path"]) for s in segments]

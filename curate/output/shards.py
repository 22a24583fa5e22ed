"""Writing Arrow IPC stream shards, and the record each one leaves for the manifest.

Shards are the IPC *stream* format because `datasets.Dataset.from_file` and
`load_from_disk` memory-map only streams. Every shard of a version has the same
schema (plain `string` and `list` types), which `load_from_disk` requires. The
writer hashes bytes as they are written, so a shard's sha256 costs no second read.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class ShardInfo:
    """What the manifest records about one shard."""

    path: str
    rows: int
    bytes: int
    sha256: str
    tokens: int | None = None  # shards with a num_tokens column: their sum
    documents: int | None = None  # packed shards: documents whose last token is here
    split: str | None = None  # versions with held-out splits: which one this shard is in

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


class _NoHash:
    """Staged files between passes are checked by size only: they never leave the staging
    folder, so hashing them (about 1 GB/s of sha256) would be pure cost."""

    def update(self, data: bytes | memoryview) -> None:
        return None

    def hexdigest(self) -> str:
        return ""


class _HashingFile:
    """A writable file that keeps a running sha256 and byte count of what passes through.

    Always a new file: one left at the name (a resumed run's) is unlinked first, never
    truncated, since it may be a hard link a published version shares
    (`curate.shared_files`), and a link is never written through."""

    def __init__(self, path: Path, mode: int, *, checksum: bool = True) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
        self._file = os.fdopen(fd, "wb", buffering=1 << 20)
        self.sha: Any = hashlib.sha256() if checksum else _NoHash()
        self.size = 0
        self.closed = False

    def write(self, data: bytes | memoryview) -> int:
        self.sha.update(data)
        self.size += len(data)
        return self._file.write(data)

    def flush(self) -> None:
        self._file.flush()

    def close(self, fsync: bool = False) -> None:
        if self.closed:
            return
        self._file.flush()
        if fsync:
            os.fdatasync(self._file.fileno())  # the data; a new file's size comes with it
        self._file.close()
        self.closed = True


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class ShardWriter:
    """Writes one partition's documents into shards of about `target_bytes` each.

    Shard names carry the partition's key and a counter (`part-<key>-00001.arrow`), so the
    output never depends on how many workers ran, in which order they finished, or which
    other inputs the run has.
    """

    def __init__(
        self,
        folder: Path,
        partition: str,
        schema: pa.Schema,
        target_bytes: int,
        *,
        prefix: str = "part",
        fsync: bool = True,
        file_mode: int = 0o640,
        relative_to: Path | None = None,
        first_index: int = 0,
        checksum: bool = True,
        split: str | None = None,
    ) -> None:
        self.folder = folder
        self.split = split
        self.partition = partition
        self.first_index = first_index  # a resumed partition continues its shard numbering
        self.checksum = checksum
        self.schema = schema
        self.target_bytes = target_bytes
        self.prefix = prefix
        self.fsync = fsync
        self.file_mode = file_mode
        self.relative_to = relative_to or folder
        self.shards: list[ShardInfo] = []
        self._file: _HashingFile | None = None
        self._writer: pa.ipc.RecordBatchStreamWriter | None = None
        self._path: Path | None = None
        self._rows = 0
        self._counts_tokens = "num_tokens" in schema.names
        self._tokens = 0
        self._documents = 0
        self._packed = False

    def _open(self) -> None:
        index = self.first_index + len(self.shards)
        name = f"{self.prefix}-{self.partition}-{index:05d}.arrow"
        self._path = self.folder / name
        self._file = _HashingFile(self._path, self.file_mode, checksum=self.checksum)
        self._writer = pa.ipc.new_stream(self._file, self.schema)
        self._rows = self._tokens = self._documents = 0

    def write(self, batch: pa.RecordBatch, *, documents: int | None = None) -> None:
        """Append rows; `documents` is how many documents they complete, when not one per row
        (packed rows)."""
        if batch.num_rows == 0:
            return
        if batch.schema != self.schema:
            batch = batch.select(self.schema.names).cast(self.schema)
        if self._writer is None:
            self._open()
        assert self._writer is not None and self._file is not None
        self._writer.write_batch(batch)
        self._rows += batch.num_rows
        self._documents += batch.num_rows if documents is None else documents
        self._packed = self._packed or documents is not None
        if self._counts_tokens:
            self._tokens += int(pc.sum(batch.column("num_tokens")).as_py() or 0)
        if self._file.size >= self.target_bytes:
            self._close_current()

    def _close_current(self) -> None:
        if self._writer is None or self._file is None or self._path is None:
            return
        self._writer.close()
        self._file.close(fsync=self.fsync)
        rel = self._path.relative_to(self.relative_to).as_posix()
        tokens = self._tokens if self._counts_tokens else None
        documents = self._documents if self._packed else None
        digest = self._file.sha.hexdigest()
        info = ShardInfo(rel, self._rows, self._file.size, digest, tokens, documents, self.split)
        self.shards.append(info)
        self._writer = self._file = self._path = None

    def close(self) -> list[ShardInfo]:
        self._close_current()
        return self.shards

    @property
    def bytes_written(self) -> int:
        """Bytes in the shard being written (0 between shards)."""
        return self._file.size if self._file is not None else 0

    def abort(self) -> None:
        if self._file is not None:
            self._file.close()
        self._writer = self._file = None


def write_table(
    path: Path,
    table: pa.Table,
    *,
    fsync: bool = True,
    file_mode: int = 0o640,
    relative_to: Path | None = None,
) -> ShardInfo:
    """One whole table as one stream file (side outputs: rejected, quarantine)."""
    f = _HashingFile(path, file_mode)
    with pa.ipc.new_stream(f, table.schema) as writer:
        writer.write_table(table)
    f.close(fsync=fsync)
    name = path.relative_to(relative_to).as_posix() if relative_to else path.name
    return ShardInfo(name, table.num_rows, f.size, f.sha.hexdigest())


def read_stream(path: Path) -> pa.Table:
    """A stream file memory-mapped and read without copying."""
    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_stream(source).read_all()


def write_batches(
    path: Path,
    schema: pa.Schema,
    batches: Iterable[pa.RecordBatch],
    *,
    fsync: bool = True,
    file_mode: int = 0o640,
    relative_to: Path | None = None,
) -> ShardInfo:
    """Batches as one stream file, as they come (the tail shard: never held whole)."""
    f = _HashingFile(path, file_mode)
    rows = 0
    with pa.ipc.new_stream(f, schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
            rows += batch.num_rows
    f.close(fsync=fsync)
    name = path.relative_to(relative_to).as_posix() if relative_to else path.name
    return ShardInfo(name, rows, f.size, f.sha.hexdigest())

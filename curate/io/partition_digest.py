"""A digest of what one partition holds, taken by the worker that read it.

The digest is xxh3_128 (hex, `xxh3_128:` prefix) of the bytes the partition's range covers
in its input's own unit (`curate.io.partition_key.UNITS`): the byte range of a plain JSONL
file (or of a file of a format read whole), the whole file of a compressed stream, the
column chunks of a Parquet file's row groups with the file's schema, the schema and the
buffers of an Arrow file's record batches (dictionaries' values included), each member's
name and bytes for a folder's members (a renamed column or a changed dictionary changes
what the partition holds, though no column chunk or index buffer changes). It is hashed
right after the partition is read, from the page cache the read just filled, and before
the input's identity is checked again (`curate.input_watch.check`), so it is of the bytes
the run read. The partition's record and the manifest's `partitions` list carry it: two
runs whose partition has one key and one digest read the same bytes, and the stage cache
keys pass 0's entries by it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pyarrow as pa
import xxhash

from curate.io import folders
from curate.io.partitions import Partition

_CHUNK = 4 << 20


def partition_digest(part: Partition) -> str:
    h = xxhash.xxh3_128()
    inp = part.input
    unit = part.unit
    if unit == "stream":
        _update_range(h, inp.path, 0, None)
    elif unit == "row_groups":
        h.update(_parquet_schema(inp.path))  # names and types: not in the column chunks
        for offset, length in _column_chunks(inp.path, part.start, part.stop):
            _update_range(h, inp.path, offset, offset + length)
    elif unit == "record_batches":
        _update_batches(h, inp.path, part.start, part.stop)
    elif unit == "members":
        members = folders.members_of(inp.path, inp.format, inp.size, inp.mtime_ns, inp.name)
        for m in members[part.start : part.stop]:
            name = m.rel.encode("utf-8", "surrogateescape")
            h.update(len(name).to_bytes(8, "little") + name + m.size.to_bytes(8, "little"))
            _update_range(h, os.path.join(inp.path, m.rel), 0, None)
    else:  # bytes
        _update_range(h, inp.path, part.start, part.stop)
    return f"xxh3_128:{h.hexdigest()}"


def _update_range(h: xxhash.xxh3_128, path: str, start: int, stop: int | None) -> None:
    with open(path, "rb") as f:
        f.seek(start)
        left = None if stop is None else stop - start
        buf = bytearray(_CHUNK)
        view = memoryview(buf)
        while left is None or left > 0:
            n = f.readinto(view if left is None or left >= _CHUNK else view[:left])
            if not n:
                break
            h.update(view[:n])
            if left is not None:
                left -= n


def _column_chunks(path: str, start: int, stop: int) -> Iterator[tuple[int, int]]:
    """(offset, length) of every column chunk of row groups start..stop-1."""
    import pyarrow.parquet as pq

    md = pq.ParquetFile(path, memory_map=True).metadata
    for i in range(start, stop):
        group = md.row_group(i)
        for j in range(group.num_columns):
            col = group.column(j)
            offset = col.data_page_offset
            if col.has_dictionary_page and col.dictionary_page_offset is not None:
                offset = min(offset, col.dictionary_page_offset)
            yield offset, col.total_compressed_size


def _parquet_schema(path: str) -> bytes:
    """The file's Arrow schema as Parquet stores it (column names, types, metadata)."""
    import pyarrow.parquet as pq

    return bytes(pq.ParquetFile(path, memory_map=True).schema_arrow.serialize())


def _update_batches(h: xxhash.xxh3_128, path: str, start: int, stop: int) -> None:
    """The buffers of record batches start..stop-1 of an Arrow IPC file or stream, as mapped."""
    from curate.io.columnar import ipc_batches

    schema_done = False
    for batch in ipc_batches(path, start, stop):
        if not schema_done:  # names and types: not in the buffers
            h.update(batch.schema.serialize())
            schema_done = True
        for column in batch.columns:
            buffers = list(column.buffers())
            if pa.types.is_dictionary(column.type):  # the values the indices point at
                buffers += column.dictionary.buffers()
            for buffer in buffers:
                if buffer is None:
                    h.update(b"\0")
                    continue
                h.update(len(buffer).to_bytes(8, "little"))
                h.update(memoryview(buffer))

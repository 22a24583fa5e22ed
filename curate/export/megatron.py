"""Megatron-LM's indexed dataset: `<part>.bin` (every sequence's ids, back to back) and
`<part>.idx` (the `MMIDIDX` index), the format megatron-core's `IndexedDataset` reads and
`GPTDataset` samples from.

One sequence per row of the version: a document, or a packed row. `.idx` is, in order: the
9-byte header `MMIDIDX\\0\\0`, version 1 (u64), the dtype code (u8), the sequence count
(u64), the document count (u64: sequences + 1), each sequence's length (int32), its byte
offset in `.bin` (int64), and the document indices (int64: 0, 1, ..., n; each row is its
own document). Ids are written straight from the memory-mapped shards, converted only when
the stored uint32 becomes int32.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pyarrow as pa

from curate.export.dtypes import check_ids
from curate.export.files import HashedFile
from curate.export.record import ExportFile, ExportPart
from curate.export.source import TOKENS, Part, Source

HEADER = b"MMIDIDX\x00\x00"
DTYPE_CODES = {np.dtype(np.uint16): 8, np.dtype(np.int32): 4}


def list_parts(column: pa.ChunkedArray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each chunk of a list<int> column as (its flat values, its row lengths), zero-copy."""
    out = []
    for chunk in column.chunks:
        offsets = chunk.offsets.to_numpy(zero_copy_only=True)
        start, stop = int(offsets[0]), int(offsets[-1])
        values = chunk.values.slice(start, stop - start).to_numpy(zero_copy_only=True)
        out.append((values, np.diff(offsets)))
    return out


def write_part(
    source: Source, part: Part, folder: Path, dtype: np.dtype, max_id: int
) -> tuple[ExportPart, list[ExportFile]]:
    what = f"{source.label} ({part.name})"
    lengths: list[np.ndarray] = []
    tokens = 0
    with HashedFile(folder, f"{part.name}.bin") as data:
        for table in source.tables(part):
            for values, sizes in list_parts(table.column(TOKENS)):
                check_ids(values, max_id, what)
                data.write(values if values.dtype == dtype else values.astype(dtype))
                lengths.append(sizes)
                tokens += len(values)
        bin_file = data.close()
    sizes = np.concatenate(lengths) if lengths else np.empty(0, np.int32)
    idx_file = write_index(folder, f"{part.name}.idx", sizes, dtype)
    record = ExportPart(
        name=part.name, split=part.split, rows=len(sizes), tokens=tokens,
        files=[bin_file.path, idx_file.path],
    )  # fmt: skip
    return record, [bin_file, idx_file]


def write_index(folder: Path, rel: str, sizes: np.ndarray, dtype: np.dtype) -> ExportFile:
    n = len(sizes)
    pointers = np.zeros(n, np.int64)
    if n:
        np.cumsum(sizes[:-1].astype(np.int64) * dtype.itemsize, out=pointers[1:])
    with HashedFile(folder, rel) as idx:
        idx.write(HEADER + struct.pack("<Q", 1) + struct.pack("<B", DTYPE_CODES[dtype]))
        idx.write(struct.pack("<Q", n) + struct.pack("<Q", n + 1))
        idx.write(sizes.astype(np.int32))
        idx.write(pointers)
        idx.write(np.arange(n + 1, dtype=np.int64))
        return idx.close()


def read_index_header(path: Path) -> tuple[int, int, int]:
    """(dtype code, sequences, documents) of an `.idx` file, for `curate verify`."""
    with open(path, "rb") as f:
        head = f.read(len(HEADER) + 8 + 1 + 16)
    if len(head) < len(HEADER) + 25 or not head.startswith(HEADER):
        raise ValueError("not a Megatron MMIDIDX index")
    (code,) = struct.unpack_from("<B", head, len(HEADER) + 8)
    seqs, docs = struct.unpack_from("<QQ", head, len(HEADER) + 9)
    return code, seqs, docs

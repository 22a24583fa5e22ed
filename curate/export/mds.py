"""MosaicML Streaming's MDS format, written by our own code: streaming's writer pins numpy <
2.2 and xxhash < 4 and cannot be imported beside curate's (its reader is tested in a
virtual environment of its own, tests/export/test_mds.py).

Each part (split) is a folder `StreamingDataset(local=...)` reads: `index.json` and
`shard.NNNNN.mds` files of at most 64 MiB. A shard is the sample count (u32), the offset of
each sample and of the end (u32, from the file's start), the writer's configuration as JSON,
then the samples; a sample is the byte size of each column (u32, columns in name order, all
of variable size here) followed by each column's bytes. Token columns (`input_ids`, and a
chat version's `labels` or `loss_mask`, `position_ids`, `cu_seqlens`) are `ndarray:<type>`
(the stored type: one shape byte, the length, the values); `id` is `str`; every other
column is `json`, which keeps nulls, numbers and lists. Each shard's xxh3_128 is in the
index, so `StreamingDataset(validate_hash="xxh3_128")` checks it too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from curate.errors import CurateError
from curate.export.dtypes import check_ids
from curate.export.files import HashedFile
from curate.export.megatron import list_parts
from curate.export.record import ExportFile, ExportPart
from curate.export.source import TOKENS, Part, Source

SIZE_LIMIT = 1 << 26
ARRAY_COLUMNS = (TOKENS, "labels", "loss_mask", "position_ids", "cu_seqlens")
HASH = "xxh3_128"
_SHAPE_TYPES = ((1 << 8, 0, np.uint8), (1 << 16, 1, np.uint16), (1 << 32, 2, np.uint32))


def encodings(schema: pa.Schema) -> dict[str, str]:
    """Each column's MDS encoding."""
    out = {}
    for field in schema:
        if field.name in ARRAY_COLUMNS and pa.types.is_list(field.type):
            out[field.name] = f"ndarray:{field.type.value_type.to_pandas_dtype().__name__}"
        elif field.name == "id" and pa.types.is_string(field.type):
            out[field.name] = "str"
        else:
            out[field.name] = "json"
    return out


def _array_bytes(values: np.ndarray) -> bytes:
    """MDS `ndarray` with its type in the column's encoding: (ndim << 2 | shape type), the
    shape, the values."""
    n = len(values)
    for bound, code, kind in _SHAPE_TYPES:
        if n < bound:
            return bytes([(1 << 2) | code]) + np.array([n], kind).tobytes() + values.tobytes()
    raise CurateError(f"a sequence of {n:,} ids is too long for MDS")


class ShardWriter:
    """Samples gathered into shards of at most `SIZE_LIMIT` bytes, then the index."""

    def __init__(self, folder: Path, part: str, columns: dict[str, str]) -> None:
        self.folder, self.part = folder, part
        self.names = sorted(columns)
        self.config = {
            "column_encodings": [columns[n] for n in self.names],
            "column_names": self.names,
            "column_sizes": [None] * len(self.names),
            "compression": None,
            "format": "mds",
            "hashes": [HASH],
            "size_limit": SIZE_LIMIT,
            "version": 2,
        }
        self.config_bytes = json.dumps(self.config, sort_keys=True).encode("utf-8")
        self.samples: list[bytes] = []
        self.size = 8 + len(self.config_bytes)
        self.shards: list[dict[str, Any]] = []
        self.files: list[ExportFile] = []

    def add(self, sample: bytes) -> None:
        if self.samples and self.size + len(sample) + 4 > SIZE_LIMIT:
            self.flush()
        self.samples.append(sample)
        self.size += len(sample) + 4

    def flush(self) -> None:
        if not self.samples:
            return
        n = len(self.samples)
        sizes = np.fromiter((len(s) for s in self.samples), np.int64, n)
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(sizes, out=offsets[1:])
        offsets += 4 + 4 * (n + 1) + len(self.config_bytes)
        basename = f"shard.{len(self.shards):05d}.mds"
        with HashedFile(self.folder, f"{self.part}/{basename}") as out:
            out.write(np.array([n], np.uint32).tobytes() + offsets.astype(np.uint32).tobytes())
            out.write(self.config_bytes)
            out.write(b"".join(self.samples))
            record = out.close()
        self.files.append(record)
        raw = {"basename": basename, "bytes": record.bytes, "hashes": {HASH: record.xxh3_128}}
        self.shards.append({"samples": n, "raw_data": raw, "zip_data": None, **self.config})
        self.samples, self.size = [], 8 + len(self.config_bytes)

    def finish(self) -> list[ExportFile]:
        self.flush()
        with HashedFile(self.folder, f"{self.part}/index.json") as index:
            index.write(json.dumps({"shards": self.shards, "version": 2}, sort_keys=True).encode())
            self.files.append(index.close())
        return self.files


def write_part(
    source: Source, part: Part, folder: Path, max_id: int
) -> tuple[ExportPart, list[ExportFile]]:
    what = f"{source.label} ({part.name})"
    schema = source.version.schema()
    columns = encodings(schema)
    writer = ShardWriter(folder, part.name, columns)
    rows = tokens = 0
    for table in source.tables(part):
        cells: list[list[bytes]] = []
        for name in writer.names:
            cells.append(_column_bytes(table, name, columns[name], what))
            if name == TOKENS:
                for values, _ in list_parts(table.column(TOKENS)):
                    check_ids(values, max_id, what)
                    tokens += len(values)
        for row in zip(*cells, strict=True):
            head = np.fromiter((len(c) for c in row), np.uint32, len(row)).tobytes()
            writer.add(head + b"".join(row))
        rows += table.num_rows
    record = ExportPart(
        name=part.name, split=part.split, rows=rows, tokens=tokens,
        files=[f.path for f in writer.finish()],
    )  # fmt: skip
    return record, writer.files


def _column_bytes(table: pa.Table, name: str, encoding: str, what: str) -> list[bytes]:
    column = table.column(name)
    if encoding.startswith("ndarray:"):
        out = []
        for values, sizes in list_parts(column):
            if len(sizes) and int(sizes.min()) == 0:
                raise CurateError(f"{what}: a row has an empty {name}, which MDS cannot encode")
            ends = np.cumsum(sizes)
            out += [_array_bytes(values[e - s : e]) for s, e in zip(sizes, ends, strict=True)]
        return out
    if encoding == "str":
        return [v.encode("utf-8") for v in column.to_pylist()]
    return [json.dumps(v).encode("utf-8") for v in column.to_pylist()]

"""The lineage side table's files, columns and id hash: what `publish` writes and `lookup`
reads.

Two Arrow IPC *file*s (random access by record batch) under `lineage/` in the version:

- `documents.arrow`: one row per document written, in output order (`shard`, `row`,
  `start`), zstd-compressed in batches of `BATCH_ROWS` rows. `shard` indexes the manifest's
  `shards` list; `start` is where the document's first token is in that row (packed rows;
  null otherwise); `input` indexes the manifest's `inputs` (whose path and hash say which
  file); `line` is its line (JSONL) or row (Parquet, Arrow, CSV, a JSON array), numbered
  from 1 as quarantine numbers records; `offset` the byte its line starts at (JSONL: in
  the file, or in the decompressed stream of a .gz/.zst; a JSON array: where its record
  starts). Null where the format has none. `changed`: bit p set when the map stage at
  recipe position p changed the document's text; `pii`: what a pii stage found, as
  `TYPE start-end` items joined by `;` (positions, never values; null: nothing).
- `ids.arrow`: `hash` (xxh3-64 of the id, sorted) and `position` (the document's row in
  documents.arrow: uint32, or uint64 past 2**32 documents), uncompressed, so a lookup by id
  memory-maps it and reads a few pages.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import xxhash

FOLDER = "lineage"
DOCUMENTS = f"{FOLDER}/documents.arrow"
IDS = f"{FOLDER}/ids.arrow"
BATCH_ROWS = 1 << 16

DOCUMENTS_SCHEMA = pa.schema(
    [
        pa.field("shard", pa.int32()),
        pa.field("row", pa.int64()),
        pa.field("start", pa.int32()),
        pa.field("id", pa.string()),
        pa.field("input", pa.int32()),
        pa.field("line", pa.int64()),
        pa.field("offset", pa.int64()),
        pa.field("changed", pa.uint64()),
        pa.field("pii", pa.string()),
    ]
)


def ids_schema(documents: int) -> pa.Schema:
    """`position` is uint32 while the table has fewer than 2**32 rows (4 bytes per document
    less), uint64 past that."""
    position = pa.uint32() if documents < 1 << 32 else pa.uint64()
    return pa.schema([pa.field("hash", pa.uint64()), pa.field("position", position)])


def id_hashes(ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """xxh3-64 of each id's UTF-8 bytes: stable across runs, machines and library versions."""
    return np.fromiter(
        (xxhash.xxh3_64_intdigest(v.encode()) for v in ids.to_pylist()),
        np.uint64,
        count=len(ids),
    )


def id_hash(doc_id: str) -> int:
    return xxhash.xxh3_64_intdigest(doc_id.encode())

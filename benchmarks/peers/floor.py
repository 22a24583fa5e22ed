"""The hand-written floor: the least work that gives normalize + exact dedup.

pyarrow's streaming JSON reader, ``unicodedata.normalize`` per document, a set of
128-bit digests of the normalized UTF-8 text, and one Arrow IPC stream writer. No
checksums, no manifest, no fsync, no second pass, one process (the JSON reader
parses on pyarrow's threads). Anything a toolkit adds on top of this is overhead
the benchmark makes visible.

The kept columns are assembled from the UTF-8 bytes already encoded for hashing
rather than with ``pa.array(list_of_str)``, which would encode every text a second
time and, on its first call, import pandas (0.2 s here): a floor should be a floor.

Usage: python -m benchmarks.peers.floor INPUT_DIR OUTPUT_DIR
"""

from __future__ import annotations

import json
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.json as pj
import xxhash

SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string())])
# Blocks must hold the longest line (documents are at most 1 MB, escaped JSON larger).
BLOCK_BYTES = 16 << 20


def string_array(values: list[bytes]) -> pa.Array:
    """An Arrow string array over UTF-8 values (a batch stays far below 2 GB)."""
    offsets = np.zeros(len(values) + 1, dtype=np.int32)
    np.cumsum(np.fromiter(map(len, values), np.int32, len(values)), out=offsets[1:])
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(values))]
    return pa.Array.from_buffers(pa.string(), len(values), buffers)


def run(inputs: list[Path], output: Path) -> dict[str, int]:
    seen: set[bytes] = set()
    docs_in = docs_out = 0
    read_options = pj.ReadOptions(block_size=BLOCK_BYTES)
    parse_options = pj.ParseOptions(explicit_schema=SCHEMA, unexpected_field_behavior="ignore")
    output.mkdir(parents=True, exist_ok=True)
    with pa.ipc.new_stream(str(output / "part-00000.arrow"), SCHEMA) as writer:
        for path in inputs:
            reader = pj.open_json(path, read_options=read_options, parse_options=parse_options)
            for batch in reader:
                ids, texts = [], []
                for doc_id, text in zip(
                    batch.column("id").to_pylist(), batch.column("text").to_pylist(), strict=True
                ):
                    data = unicodedata.normalize("NFC", text).encode()
                    digest = xxhash.xxh3_128_digest(data)
                    if digest not in seen:
                        seen.add(digest)
                        ids.append(doc_id.encode())
                        texts.append(data)
                docs_in += batch.num_rows
                docs_out += len(ids)
                columns = [string_array(ids), string_array(texts)]
                writer.write_batch(pa.RecordBatch.from_arrays(columns, schema=SCHEMA))
    return {"docs_in": docs_in, "docs_out": docs_out}


def main() -> None:
    source, target = Path(sys.argv[1]), Path(sys.argv[2])
    print(json.dumps(run(sorted(source.glob("*.jsonl")), target)))


if __name__ == "__main__":
    main()

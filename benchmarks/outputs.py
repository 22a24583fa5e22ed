"""Read back what each contender wrote and reduce it to digests that must agree.

Every contender writes a different format (Arrow IPC streams, a `datasets` folder,
JSONL), so equality is checked on content: the number of documents, a digest of the
sorted (id, sha256(text)) pairs (the same documents kept, whatever the order), and a
digest of the same pairs in output order (the same order too). The first two must
match across contenders; order is reported, since datatrove writes one file per task
and deals files to tasks round-robin.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


@dataclass(frozen=True)
class Digest:
    docs: int
    text_bytes: int
    documents: str
    order: str


def digest(pairs: Iterator[tuple[str, str]]) -> Digest:
    rows = []
    ordered = hashlib.sha256()
    text_bytes = 0
    for doc_id, text in pairs:
        data = text.encode()
        text_bytes += len(data)
        row = doc_id.encode() + b"\0" + hashlib.sha256(data).digest()
        ordered.update(row)
        rows.append(row)
    documents = hashlib.sha256(b"".join(sorted(rows))).hexdigest()
    return Digest(len(rows), text_bytes, documents[:16], ordered.hexdigest()[:16])


def arrow_pairs(files: list[Path]) -> Iterator[tuple[str, str]]:
    """(id, text) from Arrow IPC files, stream format or file format."""
    for path in files:
        with pa.memory_map(str(path)) as source:
            try:
                batches = list(pa.ipc.open_stream(source))
            except pa.ArrowInvalid:
                batches = list(pa.ipc.open_file(source).iter_batches())
            for batch in batches:
                yield from zip(batch["id"].to_pylist(), batch["text"].to_pylist(), strict=True)


def parquet_pairs(files: list[Path]) -> Iterator[tuple[str, str]]:
    for path in files:
        for batch in pq.ParquetFile(path).iter_batches(columns=["id", "text"]):
            yield from zip(batch["id"].to_pylist(), batch["text"].to_pylist(), strict=True)


def jsonl_pairs(files: list[Path]) -> Iterator[tuple[str, str]]:
    for path in files:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                yield record["id"], record["text"]


def read_folder(folder: Path) -> Digest:
    """Digest whatever a peer wrote into folder (the format is told by the suffix)."""
    for suffix, reader in ((".arrow", arrow_pairs), (".parquet", parquet_pairs)):
        files = sorted(folder.rglob(f"*{suffix}"))
        if files:
            return digest(reader(files))
    files = sorted(folder.rglob("*.jsonl"))
    if not files:
        raise FileNotFoundError(f"no output files under {folder}")
    return digest(jsonl_pairs(files))


def curate_shards(root: Path, name: str) -> list[Path]:
    """The shards of the newest published version of dataset name under root."""
    dataset = root / name
    version = (dataset / "LATEST").read_text().strip()
    shards = sorted((dataset / version / "shards").glob("*.arrow"))
    if not shards:
        raise FileNotFoundError(f"no shards in {dataset / version}")
    return shards


def read_curate(root: Path, name: str) -> Digest:
    return digest(arrow_pairs(curate_shards(root, name)))

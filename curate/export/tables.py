"""Parquet and JSONL: every column of the version (ids, text, metadata, token ids, labels,
packing columns), one output file per shard, in the shards' order.

Parquet keeps the Arrow types (uint16 ids stay uint16), so polars, pyarrow and `datasets`
read back exactly the version's table. JSONL keeps every value; its types are the export
manifest's `columns`, which a reader casts back to (tests/export/test_tables.py does).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from curate.export.files import hashed
from curate.export.record import ExportFile, ExportPart
from curate.export.source import TOKENS, Part, Source


def write_part(
    source: Source, part: Part, folder: Path, to: str
) -> tuple[ExportPart, list[ExportFile]]:
    files, rows, tokens = [], 0, 0
    (folder / part.name).mkdir()
    for i, table in enumerate(source.tables(part)):
        rel = f"{part.name}/{i:05d}.{to}"
        if to == "parquet":
            _parquet(table, folder / rel)
        else:
            _jsonl(table, folder / rel)
        files.append(hashed(folder, rel))
        rows += table.num_rows
        if TOKENS in table.column_names:
            tokens += sum(len(c.flatten()) for c in table.column(TOKENS).chunks)
    record = ExportPart(
        name=part.name, split=part.split, rows=rows,
        tokens=tokens if source.tokenized else None, files=[f.path for f in files],
    )  # fmt: skip
    return record, files


def _parquet(table: pa.Table, path: Path) -> None:
    import pyarrow.parquet as pq

    pq.write_table(table, path)  # snappy and dictionaries: the readers' defaults


def _jsonl(table: pa.Table, path: Path) -> None:
    """polars writes JSON Lines at hundreds of MB/s; one batch at a time keeps memory flat."""
    import polars as pl

    with open(path, "xb") as f:
        for batch in table.to_batches(max_chunksize=65536):
            pl.from_arrow(pa.Table.from_batches([batch])).write_ndjson(f)  # type: ignore[union-attr]

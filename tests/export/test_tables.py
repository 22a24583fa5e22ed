"""Parquet and JSONL exports are lossless: polars and `datasets` read back every row of every
split with its id, text, metadata, token ids and chat labels (JSONL cast back to the types
the export manifest records)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from export_fixtures import SAMPLE_TOKENIZER, build, build_chat

import curate
from curate.export import export
from curate.verify import verify


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tables")
    tok = {"tokenize": {"source": str(SAMPLE_TOKENIZER), "keep_text": True}}
    return {
        "text": build(root, "text", [{"normalize": {}}], split={"validation": 0.2}),
        "tokens": build(root, "tokens", [tok]),
        "packed": build(
            root,
            "packed",
            [{"tokenize": {"source": str(SAMPLE_TOKENIZER), "pack": {"seq_len": 32}}}],
        ),
        "chat": build_chat(root, "chat", pack={"seq_len": 96}),
    }


def read_back(out: Path, part: str, to: str, reader: str, schema: pa.Schema) -> list[dict]:
    files = sorted(str(p) for p in (out / part).iterdir())
    if reader == "polars":
        import polars as pl

        if to == "parquet":
            return pl.read_parquet(files).to_arrow().cast(schema).to_pylist()
        frames = [
            pl.read_ndjson(f, schema=pl.Schema(pl.from_arrow(schema.empty_table()).schema))
            for f in files
        ]
        return pl.concat(frames).to_arrow().cast(schema).to_pylist()
    import datasets

    kind = "parquet" if to == "parquet" else "json"
    ds = datasets.load_dataset(
        kind, data_files=files, split="train", cache_dir=str(out.parent / "hf")
    )
    return ds.with_format("arrow")[:].cast(schema).to_pylist()


@pytest.mark.parametrize("to", ["parquet", "jsonl"])
@pytest.mark.parametrize("name", ["text", "tokens", "packed", "chat"])
def test_round_trip(versions: dict[str, Path], tmp_path: Path, name: str, to: str) -> None:
    out = tmp_path / "out"
    manifest = export(versions[name], to, out)
    assert verify(out) == []
    v = curate.open(versions[name])
    schema = v.schema()
    assert manifest.columns == [{"name": f.name, "type": str(f.type)} for f in schema]
    for split in v.splits or [None]:
        rows = v.to_arrow(split).to_pylist()
        for reader in ("polars", "datasets"):
            assert read_back(out, split or "data", to, reader, schema) == rows, reader
    if to == "parquet":  # the stored types themselves, not only the values
        import pyarrow.parquet as pq

        first = sorted((out / (v.splits[0] if v.splits else "data")).iterdir())[0]
        assert pq.read_schema(first).remove_metadata() == schema.remove_metadata()

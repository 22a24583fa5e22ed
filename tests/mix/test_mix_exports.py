"""A mixture exported to every format that can carry it is its samples in index order (issue
22 pt 2: "curate export exports it"): MDS read back by MosaicML Streaming's own
`StreamingDataset` (in `.venv-mds`, as tests/export/test_mds.py reads plain versions),
Parquet and JSONL read back by polars, for a mixture of packed token rows, one of chat
versions (chat_template: input ids with their labels) and one of packed chat versions (with
position ids and sequence boundaries), repeats included: sample i of the export equals, in
every column, row `index[i]` of the source it names. Its export.json names the tokenizer its
sources name, and a chat mixture's loss column and packing. Megatron, which holds token ids
only, refuses the chat mixture as it refuses a chat version."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import REPO
from mix_fixtures import mixture_file, source_recipe

import curate
from curate.errors import CurateError
from curate.export import export, mds
from curate.export import source as export_source
from curate.export.source import Source
from curate.mix.prepare import prepare
from curate.output.shards import read_stream
from curate.verify import verify

sys.path.insert(0, str(REPO / "tests" / "export"))
from test_mds import ARRAYS, read_mds  # MosaicML Streaming reads MDS in .venv-mds

CHAT_TOKENIZER = REPO / "sample_data" / "chat" / "tokenizer"


def chat_recipe(folder: Path, name: str, inputs: str, *, pack: int = 0, **extra: Any) -> None:
    params: dict[str, Any] = {"source": str(CHAT_TOKENIZER)}
    if pack:
        params["pack"] = {"seq_len": pack}
    recipe = {
        "name": name,
        "inputs": [str(REPO / "sample_data" / inputs)],
        "id_field": "id",
        "chat": {"shape": "alpaca"},
        "stages": [{"chat_template": params}],
        "output": {"root": "out", "fsync": False},
        "engine": {"workers": 1},
        **extra,
    }
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))


@pytest.fixture(scope="module")
def mixtures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, curate.Version]:
    """A mixture of three packed token sources (two repeated), and one of three chat sources
    (one drawn from the train split of a version with splits, one repeated)."""
    root = tmp_path_factory.mktemp("mixexp")
    for name, docs in (("web", 60), ("code", 30), ("docs", 12)):
        source_recipe(root, name, docs)
    text = [
        {"recipe": "web.yaml", "weight": 0.6, "max_epochs": 2},
        {"recipe": "code.yaml", "weight": 0.3, "max_epochs": 2},
        {"recipe": "docs.yaml", "weight": 0.1, "max_epochs": 3},
    ]
    chat_recipe(root, "instruct1", "instruct/part-1.jsonl", split={"validation": 0.2})
    chat_recipe(root, "instruct2", "instruct/part-2.jsonl")
    chat_recipe(root, "alpaca", "chat/alpaca.jsonl")
    chat = [
        {"recipe": "instruct1.yaml", "weight": 0.5, "split": "train", "max_epochs": 3},
        {"recipe": "instruct2.yaml", "weight": 0.3, "max_epochs": 3},
        {"recipe": "alpaca.yaml", "weight": 0.2, "max_epochs": 4},
    ]
    chat_recipe(root, "packed1", "instruct/part-1.jsonl", pack=96)
    chat_recipe(root, "packed2", "instruct/part-2.jsonl", pack=96)
    packed = [
        {"recipe": "packed1.yaml", "weight": 0.7, "max_epochs": 3},
        {"recipe": "packed2.yaml", "weight": 0.3, "max_epochs": 3},
    ]
    return {
        "text": prepare(mixture_file(root, text, budget=6_000)),
        "chat": prepare(mixture_file(root, chat, file="chat.yaml", name="chatmix", budget=2_000)),
        "packed_chat": prepare(
            mixture_file(root, packed, file="packed.yaml", name="packedmix", budget=2_000)
        ),
    }


def samples(mixed: curate.Version) -> list[dict[str, Any]]:
    """The mixture's samples in index order, every column, read from its source versions (not
    from the mixture's own shards)."""
    index = read_stream(mixed.path / "index.arrow")
    tables = [
        curate.open(Path(s["path"])).to_arrow(s["split"]).to_pylist()
        for s in mixed.manifest["mixture"]["sources"]
    ]
    return [
        tables[k][r]
        for k, r in zip(index.column("source").to_pylist(), index.column("row").to_pylist(),
                        strict=True)
    ]  # fmt: skip


def test_the_mixtures_repeat_and_carry_labels(mixtures: dict[str, curate.Version]) -> None:
    """What the exports below must carry: repeated samples, and a chat mixture's labels."""
    for mixed in mixtures.values():
        record = mixed.manifest["mixture"]
        assert any(s["epochs"] > 1 for s in record["sources"])
        assert len(samples(mixed)) == record["samples"] > len({str(s) for s in samples(mixed)})
    chat = mixtures["chat"]
    assert {"input_ids", "labels"} <= set(chat.schema().names)
    assert chat.manifest["mixture"]["sources"][0]["split"] == "train"
    packed = set(mixtures["packed_chat"].schema().names)
    assert {"input_ids", "labels", "position_ids", "cu_seqlens"} <= packed


@pytest.fixture(scope="module")
def mds_read(
    mixtures: dict[str, curate.Version], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """Each mixture exported to MDS (the text one again with 2 kB shards, so the samples roll
    over many shards), then every export read by StreamingDataset in one process."""
    root = tmp_path_factory.mktemp("mixmds")
    folders = {}
    for name, mixed in mixtures.items():
        export(mixed.path, "mds", root / name)
        folders[name] = root / name
    limit, mds.SIZE_LIMIT = mds.SIZE_LIMIT, 2048
    try:
        export(mixtures["text"].path, "mds", root / "small")
    finally:
        mds.SIZE_LIMIT = limit
    folders["small"] = root / "small"
    return {"folders": folders, "samples": read_mds([f / "data" for f in folders.values()])}


@pytest.mark.parametrize("name", ["text", "chat", "packed_chat", "small"])
def test_mds_export_is_the_samples_in_index_order(
    mixtures: dict[str, curate.Version], mds_read: dict[str, Any], name: str
) -> None:
    mixed = mixtures["text" if name == "small" else name]
    out = mds_read["folders"][name]
    got = mds_read["samples"][str(out / "data")]
    want = samples(mixed)
    assert len(got) == len(want) == mixed.manifest["mixture"]["samples"]
    schema = mixed.schema()
    for i, (row, sample) in enumerate(zip(want, got, strict=True)):
        assert set(sample) == set(row), i
        for key, value in row.items():
            if key in ARRAYS:
                stored = schema.field(key).type.value_type.to_pandas_dtype().__name__
                assert sample[key] == {"dtype": stored, "values": value}, (i, key)
            else:
                assert sample[key] == value, (i, key)
    assert verify(out) == []
    if name == "small":
        assert len(list((out / "data").glob("shard.*.mds"))) > 3


def read_table(out: Path, to: str, schema: pa.Schema) -> list[dict[str, Any]]:
    files = sorted((out / "data").iterdir())
    if to == "parquet":
        return pq.read_table(files).cast(schema).to_pylist()
    import polars as pl

    frames = [
        pl.read_ndjson(f, schema=pl.Schema(pl.from_arrow(schema.empty_table()).schema))
        for f in files
    ]
    return pl.concat(frames).to_arrow().cast(schema).to_pylist()


@pytest.mark.parametrize("to", ["parquet", "jsonl"])
@pytest.mark.parametrize("name", ["text", "chat", "packed_chat"])
def test_table_export_is_the_samples_in_index_order(
    mixtures: dict[str, curate.Version], tmp_path: Path, name: str, to: str
) -> None:
    """Gathered 7 samples at a time (one file each), so index chunks cross shards and
    sources at every boundary."""
    mixed = mixtures[name]
    rows, export_source.MIXTURE_ROWS = export_source.MIXTURE_ROWS, 7
    try:
        manifest = export(mixed.path, to, tmp_path / "out")
    finally:
        export_source.MIXTURE_ROWS = rows
    want = samples(mixed)
    assert manifest.parts[0].rows == len(want)
    assert len(manifest.parts[0].files) == -(-len(want) // 7) > 3
    assert manifest.parts[0].tokens == mixed.manifest["tokens"]
    assert read_table(tmp_path / "out", to, mixed.schema()) == want
    assert verify(tmp_path / "out") == []
    seq_len = (Source(mixed).packing() or {}).get("seq_len")
    assert seq_len == {"text": 16, "chat": None, "packed_chat": 96}[name]
    for record in mixed.manifest["mixture"]["sources"]:  # what the ids were made with
        source = Source.open(record["path"])
        assert manifest.tokenizer == source.tokenizer()
        assert (source.packing() or {}).get("seq_len") == seq_len
    if name != "text":
        assert manifest.chat is not None and manifest.chat["loss"] == "labels"
        assert manifest.chat["packed"] is (seq_len is not None)
        assert manifest.tokenizer is not None and manifest.tokenizer["stage"] == "chat_template"


def test_megatron_refuses_the_chat_mixture(
    mixtures: dict[str, curate.Version], tmp_path: Path
) -> None:
    with pytest.raises(CurateError, match=r"chatmix v1 is a chat version: .* its labels"):
        export(mixtures["chat"].path, "megatron", tmp_path / "mega")
    assert not (tmp_path / "mega").exists()

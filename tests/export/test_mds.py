"""MDS exports read back by MosaicML Streaming's own `StreamingDataset`, in the virtual
environment README's test command makes for it (`.venv-mds`; streaming's pins clash with
curate's), run as one subprocess for every export: every sample equals its row, token types
kept, chat labels and packed rows' position ids and sequence boundaries included, splits
kept, shards rolled over at the size limit and hash-checked."""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from export_fixtures import SAMPLE_TOKENIZER, build, build_chat, required

import curate
from curate.export import export, mds
from curate.verify import verify

VENV_PYTHON = REPO / ".venv-mds" / "bin" / "python"
READER = Path(__file__).with_name("mds_reader.py")
ARRAYS = ("input_ids", "labels", "loss_mask", "position_ids", "cu_seqlens")


def read_mds(folders: list[Path]) -> dict[str, list[dict[str, Any]]]:
    if not VENV_PYTHON.exists():
        required(f"{VENV_PYTHON} is missing (README's test command creates it)")
    done = subprocess.run(
        [str(VENV_PYTHON), str(READER), *map(str, folders)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in done.stdout.splitlines():
        record = json.loads(line)
        found[record["folder"]].append(record["sample"])
    return found


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each version exported (and the plain one again with 4 kB shards), then every part of
    every export read in one process."""
    root = tmp_path_factory.mktemp("mds")
    tok = {"tokenize": {"source": str(SAMPLE_TOKENIZER), "keep_text": True}}
    versions = {
        "tokens": build(root, "tokens", [tok], split={"validation": 0.1}),
        "chat": build_chat(root, "chat"),
        "packed_chat": build_chat(root, "packed_chat", pack={"seq_len": 96}),
    }
    exports = {}
    (root / "out").mkdir()
    for name, version in versions.items():
        exports[name] = (version, export(version, "mds", root / "out" / name))
    limit, mds.SIZE_LIMIT = mds.SIZE_LIMIT, 4096
    try:
        exports["small_shards"] = (
            versions["tokens"],
            export(versions["tokens"], "mds", root / "out" / "small"),
        )
    finally:
        mds.SIZE_LIMIT = limit
    folders = {
        name: root / "out" / ("small" if name == "small_shards" else name) for name in exports
    }
    parts = [folders[n] / p.name for n, (_, m) in exports.items() for p in m.parts]
    return {"exports": exports, "folders": folders, "samples": read_mds(parts)}


def check_samples(out: Path, version: Path, samples: dict[str, list[dict[str, Any]]]) -> int:
    v = curate.open(version)
    schema = v.schema()
    compared = 0
    for split in v.splits or [None]:
        rows = v.to_arrow(split).to_pylist()
        got = samples[str(out / (split or "data"))]
        assert len(got) == len(rows) > 0
        for row, sample in zip(rows, got, strict=True):
            assert set(sample) == set(row)
            for key, value in row.items():
                if key in ARRAYS:
                    stored = schema.field(key).type.value_type.to_pandas_dtype().__name__
                    assert sample[key] == {"dtype": stored, "values": value}, key
                else:
                    assert sample[key] == value, key
            compared += 1
    return compared


@pytest.mark.parametrize("name", ["tokens", "chat", "packed_chat"])
def test_streaming_dataset_reads_every_row(exported: dict[str, Any], name: str) -> None:
    version, manifest = exported["exports"][name]
    out = exported["folders"][name]
    assert check_samples(out, version, exported["samples"]) == sum(p.rows for p in manifest.parts)
    assert verify(out) == []
    if name != "tokens":
        assert manifest.chat is not None and manifest.chat["loss"] == "labels"
        assert manifest.chat["packed"] is (name == "packed_chat")
        if name == "packed_chat":
            assert {"position_ids", "cu_seqlens"} <= set(exported["samples"][str(out / "train")][0])


def test_shards_roll_over_at_the_size_limit(exported: dict[str, Any]) -> None:
    """Several shards per split, each hashed in index.json (the reader checks xxh3_128)."""
    version, _ = exported["exports"]["small_shards"]
    out = exported["folders"]["small_shards"]
    index = json.loads((out / "train" / "index.json").read_text())
    assert len(index["shards"]) > 3
    check_samples(out, version, exported["samples"])
    assert verify(out) == []


def test_an_untokenized_version_is_refused(tmp_path: Path) -> None:
    plain = build(tmp_path / "v", "plain", [{"normalize": {}}], n=20)
    with pytest.raises(curate.CurateError, match=r"holds no token ids.*--to parquet or jsonl"):
        export(plain, "mds", tmp_path / "out")
    assert not (tmp_path / "out").exists()

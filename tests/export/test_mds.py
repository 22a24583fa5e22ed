"""MDS exports read back by MosaicML Streaming's own `StreamingDataset`, in the virtual
environment README's test command makes for it (`.venv-mds`; streaming's pins clash with
curate's), run as a subprocess: every sample equals its row, token types kept, chat labels
and packed rows' position ids and sequence boundaries included, splits kept."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from export_fixtures import SAMPLE_TOKENIZER, build, build_chat, required

import curate
from curate.export import export
from curate.verify import verify

VENV_PYTHON = REPO / ".venv-mds" / "bin" / "python"
READER = Path(__file__).with_name("mds_reader.py")


def read_mds(folder: Path) -> list[dict[str, Any]]:
    if not VENV_PYTHON.exists():
        required(f"{VENV_PYTHON} is missing (README's test command creates it)")
    done = subprocess.run(
        [str(VENV_PYTHON), str(READER), str(folder)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


def check_samples(out: Path, version: Path) -> int:
    v = curate.open(version)
    schema = v.schema()
    arrays = {f.name for f in schema if f.name in ("input_ids", "labels", "loss_mask",
                                                    "position_ids", "cu_seqlens")}  # fmt: skip
    compared = 0
    for split in v.splits or [None]:
        rows = v.to_arrow(split).to_pylist()
        samples = read_mds(out / (split or "data"))
        assert len(samples) == len(rows) > 0
        for row, sample in zip(rows, samples, strict=True):
            assert set(sample) == set(row)
            for key, value in row.items():
                if key in arrays:
                    stored = schema.field(key).type.value_type.to_pandas_dtype().__name__
                    assert sample[key] == {"dtype": stored, "values": value}, key
                else:
                    assert sample[key] == value, key
            compared += 1
    return compared


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mds")
    tok = {"tokenize": {"source": str(SAMPLE_TOKENIZER), "keep_text": True}}
    return {
        "tokens": build(root, "tokens", [tok], split={"validation": 0.1}),
        "chat": build_chat(root, "chat"),
        "packed_chat": build_chat(root, "packed_chat", pack={"seq_len": 96}),
    }


@pytest.mark.parametrize("name", ["tokens", "chat", "packed_chat"])
def test_streaming_dataset_reads_every_row(
    versions: dict[str, Path], tmp_path: Path, name: str
) -> None:
    out = tmp_path / "out"
    manifest = export(versions[name], "mds", out)
    assert check_samples(out, versions[name]) == sum(p.rows for p in manifest.parts)
    assert verify(out) == []
    if name != "tokens":
        assert manifest.chat is not None and manifest.chat["loss"] == "labels"
        assert manifest.chat["packed"] is (name == "packed_chat")


def test_shards_roll_over_at_the_size_limit(
    versions: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several shards per split, each hashed in index.json (the reader checks xxh3_128)."""
    from curate.export import mds

    monkeypatch.setattr(mds, "SIZE_LIMIT", 4096)
    out = tmp_path / "out"
    export(versions["tokens"], "mds", out)
    index = json.loads((out / "train" / "index.json").read_text())
    assert len(index["shards"]) > 3
    check_samples(out, versions["tokens"])


def test_an_untokenized_version_is_refused(tmp_path: Path) -> None:
    plain = build(tmp_path / "v", "plain", [{"normalize": {}}], n=20)
    with pytest.raises(curate.CurateError, match=r"holds no token ids.*--to parquet or jsonl"):
        export(plain, "mds", tmp_path / "out")
    assert not (tmp_path / "out").exists()

"""Megatron exports read by megatron-core's own `IndexedDataset` (item i is row i of the
version, for every i, in every split) and sampled by its `GPTDataset` (whose sample-index
helpers are compiled C++: the wheel's, or built by the machine's compiler); the token type
comes from the largest id the tokenizer can produce, added tokens included."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from export_fixtures import (
    BIG_EOS,
    BIG_EOS_ID,
    SAMPLE_TOKENIZER,
    big_tokenizer,
    build,
    build_chat,
    mistral_tekken,
    required,
)

import curate
from curate.export import export
from curate.verify import verify


def megatron() -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from megatron.core.datasets import indexed_dataset
    except ImportError:
        required("megatron-core is not installed (pip install '.[test]')")
    return indexed_dataset


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("megatron")
    sample = {"tokenize": {"source": str(SAMPLE_TOKENIZER)}}
    big = {"tokenize": {"source": str(big_tokenizer(root / "bigtok")), "eos_token": BIG_EOS}}
    return {
        "sample": build(root, "sample", [sample], split={"validation": 0.1, "test": 0.05}),
        "packed": build(
            root, "packed", [{"tokenize": {**sample["tokenize"], "pack": {"seq_len": 32}}}]
        ),
        "tekken": build(root, "tekken", [{"tokenize": {"source": str(mistral_tekken())}}], n=60),
        "big": build(root, "big", [big], n=60),
    }


def check_items(out: Path, version: Path) -> dict[str, Any]:
    """Every item of every split's .bin/.idx equals that row's ids, as megatron-core reads it."""
    reader = megatron().IndexedDataset
    v = curate.open(version)
    found = {}
    for split in v.splits or [None]:
        ids = v.to_arrow(split).column("input_ids").to_pylist()
        ds = reader(str(out / (split or "data")))
        assert len(ds) == len(ids) > 0
        for i, row in enumerate(ids):
            assert ds[i].tolist() == row, (split, i)
        found[split or "data"] = ds
    return found


@pytest.mark.parametrize(
    ("name", "dtype", "max_id"),
    [("sample", np.uint16, 1999), ("packed", np.uint16, 1999), ("tekken", np.int32, 131_071),
     ("big", np.int32, BIG_EOS_ID)],
)  # fmt: skip
def test_items_are_rows_in_the_type_the_tokenizer_needs(
    versions: dict[str, Path], tmp_path: Path, name: str, dtype: type, max_id: int
) -> None:
    out = tmp_path / "out"
    manifest = export(versions[name], "megatron", out)
    assert manifest.dtype == np.dtype(dtype).name
    assert manifest.tokenizer is not None and manifest.tokenizer["max_id"] == max_id
    for ds in check_items(out, versions[name]).values():
        assert ds.index.dtype == dtype
    assert verify(out) == []
    if name == "big":  # the added token past 65,535 is in the data, intact
        assert BIG_EOS_ID in np.fromfile(out / "data.bin", np.int32)


def test_splits_are_kept_and_the_manifest_says_where_they_came_from(
    versions: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    m = export(versions["sample"], "megatron", out)
    assert [p.name for p in m.parts] == ["train", "validation", "test"]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["export.json"]
        + [f"{s}.{e}" for s in ("train", "validation", "test") for e in ("bin", "idx")]
    )
    v = curate.open(versions["sample"])
    assert (m.source.version, m.source.fingerprint) == (v.name, v.fingerprint)
    assert m.tokenizer is not None and m.tokenizer["policy"]["eos"]["added"] is True
    assert sum(p.tokens or 0 for p in m.parts) == v.manifest["tokens"]


def test_gpt_dataset_samples_the_export(versions: dict[str, Path], tmp_path: Path) -> None:
    """GPTDataset over the export: its samples are windows of the documents in its own
    shuffled order, so every token it serves is the version's."""
    indexed = megatron()
    try:
        from megatron.core.datasets import helpers  # noqa: F401  (compiled sample-index helpers)
        from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
        from megatron.core.datasets.utils import Split
    except ImportError as exc:
        required(f"megatron-core's compiled helpers do not import: {exc}")
    out = tmp_path / "out"
    export(versions["sample"], "megatron", out)
    ds = indexed.IndexedDataset(str(out / "train"))

    class Tokenizer:  # what GPTDataset reads of a tokenizer: ids it pads and ends with
        vocab_size, eod, pad, unique_identifiers = 2000, 0, 4, {"class": "sample"}

    seq = 16
    config = GPTDatasetConfig(
        random_seed=1, sequence_length=seq, tokenizer=Tokenizer(), reset_position_ids=False,
        reset_attention_mask=False, eod_mask_loss=False, split="1,0,0",
        path_to_cache=str(tmp_path / "cache"),
    )  # fmt: skip
    gpt = GPTDataset(
        ds, str(out / "train"), np.arange(len(ds), dtype=np.int32), None, Split.train, config
    )
    stream = np.concatenate([ds[int(d)] for d in gpt.document_index])
    assert len(gpt) == (len(stream) - 1) // seq
    for i in range(len(gpt)):
        j = int(gpt.shuffle_index[i])
        assert gpt[i]["tokens"].tolist() == stream[j * seq : j * seq + seq].tolist()


def test_a_type_too_narrow_for_the_tokenizer_is_refused_before_writing(
    versions: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    with pytest.raises(curate.CurateError) as caught:
        export(versions["big"], "megatron", out, dtype="uint16")
    message = str(caught.value)
    assert "\n" not in message and "65,600" in message and "uint16" in message
    assert list(tmp_path.iterdir()) == []
    m = export(versions["sample"], "megatron", out, dtype="int32")  # wider is allowed
    assert m.dtype == "int32"
    check_items(out, versions["sample"])


def test_chat_versions_are_refused_for_megatron(tmp_path: Path) -> None:
    chat = build_chat(tmp_path / "v", "chat")
    with pytest.raises(
        curate.CurateError, match=r"chat version.*labels.*--to mds, parquet or jsonl"
    ):
        export(chat, "megatron", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["v"]

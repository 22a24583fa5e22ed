"""The trainer-side reader: memory-mapped, stored types, seeded order, ranks, resume, refusal."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import REPO, corpus, sealed, writable, write_jsonl, write_recipe

import curate
from curate.errors import CurateError
from curate.loader import TokenizerMismatch, open_tokens
from curate.tokenizers import tokenizer_fingerprint

TOKENIZER = REPO / "sample_data" / "tokenizer"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("loader")
    docs = corpus(400, dup_every=0)
    write_jsonl(root / "data" / "a.jsonl", docs[:250])
    write_jsonl(root / "data" / "b.jsonl", docs[250:])
    curate.run(write_recipe(root, name="plain", stages=[{"tokenize": {"source": str(TOKENIZER)}}]))
    packed = [{"tokenize": {"source": str(TOKENIZER), "pack": {"seq_len": 32}}}]
    curate.run(write_recipe(root, name="packed", stages=packed))
    return root / "out"


def stream(path: Path) -> np.ndarray:
    table = curate.open(path).to_arrow()
    return np.concatenate([c.flatten().to_numpy() for c in table.column("input_ids").chunks])


def test_dataset_is_memory_mapped_in_stored_types(built: Path) -> None:
    tokens = open_tokens(built / "plain", tokenizer=TOKENIZER)
    ds = tokens.dataset()
    assert ds.features["input_ids"].feature.dtype == "uint16"
    assert ds[:2]["input_ids"].type == pa.list_(pa.uint16())  # arrow format: never widened
    doc = tokens.document(3)
    assert doc.dtype == np.uint16 and doc.base is not None  # a view, not a copy
    assert tokens.num_tokens == len(stream(built / "plain")) and tokens.dtype == np.uint16


def test_blocks_are_seeded_sharded_and_resumable(built: Path) -> None:
    tokens = open_tokens(built / "plain")
    flat = stream(built / "plain")
    blocks = tokens.blocks(16, seed=7)
    n = len(flat) // 16
    assert len(blocks) == n
    seen = list(blocks)
    assert all(b.dtype == np.uint16 and len(b) == 16 for b in seen)
    assert sorted(tuple(b) for b in seen) == sorted(
        tuple(flat[i * 16 : (i + 1) * 16]) for i in range(n)
    )
    again = [tuple(b) for b in tokens.blocks(16, seed=7)]
    assert again == [tuple(b) for b in seen]
    assert again != [tuple(b) for b in tokens.blocks(16, seed=8)]
    assert [tuple(b) for b in tokens.blocks(16, shuffle=False)][:3] == [
        tuple(flat[i * 16 : (i + 1) * 16]) for i in range(3)
    ]
    ranks = [
        [r.block_index(k) for k in range(len(r))]
        for r in (tokens.blocks(16, seed=7, rank=i, world_size=3) for i in range(3))
    ]
    assert len({len(r) for r in ranks}) == 1 and not set(ranks[0]) & set(ranks[1])
    assert len(set().union(*map(set, ranks))) == 3 * (n // 3)
    rank1 = tokens.blocks(16, seed=7, rank=1, world_size=3)
    full = [tuple(b) for b in rank1]
    resumed = tokens.blocks(16, seed=7, rank=1, world_size=3, position=5 * 3)  # global
    assert [tuple(b) for b in resumed] == full[5:]
    assert list(tokens.blocks(16, seed=7, rank=1, world_size=3, position=n)) == []
    with pytest.raises(CurateError, match=f"position {n + 1} is outside the stream of {n}"):
        tokens.blocks(16, seed=7, rank=1, world_size=3, position=n + 1)
    it = tokens.blocks(16, seed=7)
    head = [next(iter(it)) for _ in range(4)]
    state = it.state_dict()
    fresh = tokens.blocks(16, seed=7)
    fresh.load_state_dict(state)
    assert state["consumed"] == 4 and [tuple(b) for b in fresh] == [tuple(b) for b in seen][4:]
    assert [tuple(b) for b in head] == [tuple(b) for b in seen][:4]


def test_packed_rows_are_the_blocks(built: Path) -> None:
    tokens = open_tokens(built / "packed")
    table = curate.open(built / "packed").to_arrow()
    full = [tuple(r) for r in table.column("input_ids").to_pylist() if len(r) == 32]
    blocks = tokens.blocks(seed=3)
    assert blocks.seq_len == 32 and sorted(tuple(b) for b in blocks) == sorted(full)


def test_refuses_another_tokenizer_unless_told(built: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(TOKENIZER, other)
    (other / "tokenizer.json").write_text(
        (other / "tokenizer.json").read_text().replace("<pad>", "<PAD>")
    )
    with pytest.raises(TokenizerMismatch, match="was tokenized with"):
        open_tokens(built / "plain", tokenizer=other)
    with pytest.raises(TokenizerMismatch):
        open_tokens(built / "plain", tokenizer=tokenizer_fingerprint(other))
    assert open_tokens(built / "plain", tokenizer=other, ignore_tokenizer_mismatch=True).num_tokens
    assert open_tokens(
        built / "plain", tokenizer=tokenizer_fingerprint(TOKENIZER / "tokenizer.json")
    )


def test_core_loader_does_not_import_torch() -> None:
    code = "import curate.loader, sys; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_works_as_a_torch_iterable_dataset(built: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader, IterableDataset

    tokens = open_tokens(built / "plain")
    blocks = tokens.blocks(16, seed=7, position=2)
    assert isinstance(blocks, IterableDataset)
    plain = [tuple(b) for b in tokens.blocks(16, seed=7)][2:]
    for workers in (0, 2):
        loader = DataLoader(blocks.torch(batch_size=4), batch_size=4, num_workers=workers)
        batches = list(loader)
        got = [tuple(row.long().tolist()) for batch in batches for row in batch]
        assert got == [tuple(int(t) for t in b) for b in plain]
        assert batches[0].dtype == torch.uint16 and batches[0].shape == (4, 16)


def test_repr_says_what_a_trainer_gets(built: Path) -> None:
    tokens = open_tokens(built / "packed")
    assert repr(tokens) == (
        f"Tokens(packed v1: {tokens.num_tokens:,} uint16 tokens, packed 32, tokenizer {TOKENIZER})"
    )


def test_blocks_refuse_conversations_with_a_loss_mask(tmp_path: Path) -> None:
    from conftest import REPO

    recipe = write_recipe(
        tmp_path,
        inputs=[str(REPO / "sample_data" / "instruct" / "*.jsonl")],
        chat={"shape": "alpaca"},
        stages=[{"chat_template": {"source": str(REPO / "sample_data" / "chat" / "tokenizer")}}],
    )
    tokens = open_tokens(curate.run(recipe).path)
    with pytest.raises(curate.CurateError, match=r"loss is on the assistant's tokens only"):
        tokens.blocks(64)
    rows = tokens.rows(seed=1)
    assert len(rows) == tokens.version.counts["written"]
    assert set(next(iter(rows))) == {"input_ids", "labels"}


def test_a_tiktoken_ranks_file_with_its_pattern_is_recognised(tmp_path: Path) -> None:
    """The pattern of a ranks file is the recipe's, recorded in the manifest: the trainer
    names the file, and the check uses that pattern (it failed for any explicit pattern)."""
    import json

    mc = pytest.importorskip("mistral_common")
    data = json.loads((Path(mc.__file__).parent / "data" / "tekken_240911.json").read_text())
    ranks = tmp_path / "tok.tiktoken"
    ranks.write_text("".join(f"{t['token_bytes']} {t['rank']}\n" for t in data["vocab"][:4000]))
    other = tmp_path / "other.tiktoken"
    other.write_text("".join(f"{t['token_bytes']} {t['rank']}\n" for t in data["vocab"][:3000]))
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(20, dup_every=0))
    stage = {"tokenize": {"source": str(ranks), "pattern": data["config"]["pattern"], "eos": False}}
    version = curate.run(write_recipe(tmp_path, name="tk", stages=[stage]))
    assert open_tokens(version.path.parent, tokenizer=ranks).num_tokens > 0
    with pytest.raises(TokenizerMismatch):
        open_tokens(version.path.parent, tokenizer=other)


def test_damaged_shards_are_refused_by_name(tmp_path: Path) -> None:
    """A shard replaced by a shorter valid one served part of the tokens; a missing one gave a
    raw pyarrow error. Both are named now, before any token is read."""
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(200, dup_every=0))
    stages = [{"tokenize": {"source": str(TOKENIZER)}}]
    output = {"root": "out", "fsync": False, "shard_size": 1}  # a shard per batch
    version = curate.run(write_recipe(tmp_path, stages=stages, output=output, batch_size=3000))
    records = version.manifest["shards"]
    assert len(records) >= 3
    writable(version.path)
    short = version.path / records[0]["path"]
    original = short.read_bytes()
    table = pa.ipc.open_stream(original).read_all()
    with pa.ipc.new_stream(str(short), table.schema) as writer:
        writer.write_table(table.slice(0, max(1, table.num_rows // 3)))
    sealed(version.path)
    with pytest.raises(CurateError, match=f"{records[0]['path']}: size .*, manifest says"):
        open_tokens(version.path.parent, tokenizer=TOKENIZER).blocks(16)
    writable(version.path)
    short.write_bytes(original)
    missing = records[1]["path"]
    (version.path / missing).unlink()
    sealed(version.path)
    with pytest.raises(CurateError, match=f"{missing}: missing"):
        open_tokens(version.path).blocks(16)


@pytest.mark.parametrize("name", ["models/my-model", "my-model", "models/my-model/tokenizer.json"])
def test_a_missing_relative_tokenizer_is_one_short_line(
    built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """It gave the Hugging Face cache's long error text ('models/x' looks like a hub id)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(CurateError) as caught:
        open_tokens(built / "plain", tokenizer=name)
    message = str(caught.value)
    expected = (
        f"tokenizer '{name}' not found: no such file or folder ({name}, resolved against "
        f"{tmp_path})"
    )
    assert message.startswith(expected), message
    assert "\n" not in message and len(message) < len(expected) + 60
    assert "snapshot" not in message and "local_files_only" not in message


def test_dtype_converts_blocks_and_rows_and_refuses_a_narrowing(built: Path) -> None:
    tokens = open_tokens(built / "plain")
    stored = [tuple(b) for b in tokens.blocks(16, seed=7)]
    for dtype in ("int64", np.int64, np.dtype("int32")):
        blocks = list(tokens.blocks(16, seed=7, dtype=dtype))
        assert all(b.dtype == np.dtype(dtype) for b in blocks)
        assert [tuple(int(t) for t in b) for b in blocks] == [
            tuple(int(t) for t in b) for b in stored
        ]
    assert next(iter(tokens.blocks(16, seed=7))).dtype == np.uint16  # the default: as stored
    rows = tokens.rows(seed=3, dtype="int64")
    row = next(iter(rows))
    assert row["input_ids"].dtype == np.int64
    assert row["input_ids"].tolist() == next(iter(tokens.rows(seed=3)))["input_ids"].tolist()
    with pytest.raises(CurateError, match=r"stored uint16 values do not all fit in int8"):
        tokens.blocks(16, dtype="int8")  # ids above 127 would wrap
    with pytest.raises(CurateError, match="not a number type"):
        tokens.blocks(16, dtype="text")


def test_dtype_gives_int64_tensors_for_an_embedding(built: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    tokens = open_tokens(built / "plain")
    blocks = tokens.blocks(16, seed=7, dtype=torch.int64)
    for workers in (0, 2):
        batches = list(DataLoader(blocks.torch(batch_size=4), batch_size=4, num_workers=workers))
        assert batches[0].dtype == torch.int64 and batches[0].shape == (4, 16)
        got = [tuple(row.tolist()) for batch in batches for row in batch]
        assert got == [tuple(int(t) for t in b) for b in tokens.blocks(16, seed=7)][: len(got)]
    embedding = torch.nn.Embedding(int(max(max(b) for b in got)) + 1, 4)
    assert embedding(batches[0]).shape == (4, 16, 4)

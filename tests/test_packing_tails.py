"""Packing tails: a partition writes full rows only; its short last row is staged and packed
with every other partition's, in partition order, into one tail shard at publish.

Smaller partitions mean more partition ends; before, each left a short row that
`blocks()` skips. Now a version has one short row per split (the tail shard's last), and
the manifest's `packing` record says how many tokens that is.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from conftest import REPO, corpus, flip_byte, write_jsonl, write_recipe
from test_packing import doc_batches, documents_in

import curate
from curate.loader import open_tokens
from curate.output.chat_packing import ChatPackSpec
from curate.output.packing import PackSpec
from curate.verify import verify

TOKENIZER = str(REPO / "sample_data" / "tokenizer")
SEQ_LEN = 64


def drain(packer: Any, batches: list[pa.RecordBatch]) -> tuple[list[pa.RecordBatch], int]:
    rows, ended = [], 0
    for batch in batches:
        for packed, n in packer.feed(batch):
            rows.append(packed)
            ended += n
    return rows, ended


@pytest.mark.parametrize("seq_len", [2, 7, 64, 5000])
def test_tails_of_partitions_pack_into_one_shard_and_every_token_is_accounted(
    seq_len: int,
) -> None:
    lengths = list(np.random.default_rng(seq_len).integers(1, 150, 240))
    docs, batches = doc_batches(lengths, [17, 0, 40, 3, 60, 1, 55, 64])
    spec = PackSpec(seq_len, pa.uint16())
    full, tails, ended = [], [], 0
    for p, batch in enumerate(batches):  # each batch a partition
        packer = spec.start(f"{p:016x}")  # a partition key
        rows, n = drain(packer, [batch])
        full += rows
        ended += n
        tail = packer.tail()
        assert tail.schema == spec.tail_schema() and packer.tail().num_rows == 0  # emptied
        # a round trip through a file, as the tail is staged
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, tail.schema) as w:
            w.write_batch(tail)
        tails.append(pa.ipc.open_stream(sink.getvalue()).read_all())
    assert all(r == seq_len for b in full for r in b.column("num_tokens").to_pylist())
    packer = spec.start_tail()
    tail_rows, n = drain(packer, [b for t in tails for b in t.to_batches()])
    flushed = list(packer.flush())
    tail_rows += [rows for rows, _ in flushed]
    ended += n + sum(k for _, k in flushed)
    assert ended == len(docs)  # each document ends once: in a partition's rows or the tail's
    table = pa.Table.from_batches(full + tail_rows, spec.output_schema())
    lengths_out = table.column("num_tokens").to_pylist()
    assert set(lengths_out[:-1]) <= {seq_len} and 0 < lengths_out[-1] <= seq_len  # one short
    assert sum(lengths_out) == sum(lengths)  # nothing lost or repeated
    assert documents_in(table) == {f"d{i}": d.tolist() for i, d in enumerate(docs)}
    tail_table = pa.Table.from_batches(tail_rows, spec.output_schema())
    assert tail_table.column("id").to_pylist()[0] == "pack-tail-000000000"
    # partition order: the tail shard's documents come in input order
    order = [int(d[1:]) for row in tail_table.column("doc_ids").to_pylist() for d in row]
    assert order == sorted(order)
    ids_in_tails = [d for t in tails for d in t.column("id").to_pylist()]
    assert list(dict.fromkeys(f"d{i}" for i in order)) == list(dict.fromkeys(ids_in_tails))


def chat_batch(ids: list[np.ndarray], labels: list[np.ndarray], first: int) -> pa.RecordBatch:
    offsets = pa.array(np.concatenate([[0], np.cumsum([len(t) for t in ids])]), pa.int32())
    return pa.record_batch(
        {
            "id": [f"c{first + j}" for j in range(len(ids))],
            "input_ids": pa.ListArray.from_arrays(offsets, pa.array(np.concatenate(ids))),
            "labels": pa.ListArray.from_arrays(offsets, pa.array(np.concatenate(labels))),
        }
    )


def test_chat_tails_keep_conversations_whole_and_mask_their_first_token() -> None:
    rng = np.random.default_rng(3)
    ids = [rng.integers(0, 30000, k).astype(np.uint16) for k in rng.integers(1, 41, 200)]
    labels = [np.where(rng.random(len(t)) < 0.5, t, -100).astype(np.int32) for t in ids]
    cuts = [0, 30, 100, 101, 200]  # four partitions
    spec = ChatPackSpec(64, pa.uint16(), "labels")
    rows, tails = [], []
    for p, (a, b) in enumerate(itertools.pairwise(cuts)):
        packer = spec.start(f"{p:016x}")  # a partition key
        rows += drain(packer, [chat_batch(ids[a:b], labels[a:b], a)])[0]
        tail = packer.tail()
        assert tail.schema == spec.tail_schema() and tail.num_rows > 0
        assert sum(len(t) for t in tail.column("input_ids").to_pylist()) < 64  # one open row
        tails.append(tail)
    packer = spec.start_tail()
    tail_rows, ended = drain(packer, tails)
    flushed = list(packer.flush())
    tail_rows += [r for r, _ in flushed]
    ended += sum(n for _, n in flushed)
    assert ended == sum(t.num_rows for t in tails)
    tail_docs = [d for r in tail_rows for d in r.column("doc_ids").flatten().to_pylist()]
    assert tail_docs == [d for t in tails for d in t.column("id").to_pylist()]  # in order
    assert tail_rows[0].column("id")[0].as_py() == "pack-tail-000000000"
    table = pa.Table.from_batches(rows + tail_rows, spec.output_schema())
    seen = {}
    for row in table.to_pylist():
        cu = row["cu_seqlens"]
        for k, doc in enumerate(row["doc_ids"]):
            seen[doc] = (row["input_ids"][cu[k] : cu[k + 1]], row["labels"][cu[k] : cu[k + 1]])
            assert row["position_ids"][cu[k] : cu[k + 1]] == list(range(cu[k + 1] - cu[k]))
    assert len(seen) == len(ids)
    for i, (tok, lab) in enumerate(zip(ids, labels, strict=True)):
        assert seen[f"c{i}"] == (tok.tolist(), [-100, *lab[1:].tolist()])
    assert sum(table.column("num_tokens").to_pylist()) == sum(len(t) for t in ids)


def packed_recipe(folder: Path, name: str, workers: int = 1, **extra: Any) -> Path:
    return write_recipe(
        folder,
        name="packed",
        partition_size="6KB",
        stages=[{"tokenize": {"source": TOKENIZER, "pack": {"seq_len": SEQ_LEN}}}],
        batch_size="1KB",
        output={"root": name, "fsync": False, "shard_size": "4KB"},
        engine={"workers": workers},
        **extra,
    )


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tails")
    docs = corpus(1500, dup_every=0)
    for i in range(3):
        write_jsonl(folder / "data" / f"f{i}.jsonl", docs[i * 500 : (i + 1) * 500])
    return folder


def shard_hashes(version: curate.Version) -> list[tuple[str, str]]:
    return [(s["path"], s["sha256"]) for s in version.manifest["shards"]]


def test_a_packed_version_has_one_short_row_counted_in_the_manifest(corpus_dir: Path) -> None:
    one = curate.run(packed_recipe(corpus_dir, "out-1", workers=1))
    two = curate.run(packed_recipe(corpus_dir, "out-2", workers=2))
    assert shard_hashes(one) == shard_hashes(two)  # the tail shard too
    m = one.manifest
    partitions = sum(i["partitions"] for i in m["inputs"])
    assert partitions >= 9
    assert m["shards"][-1]["path"] == "shards/tail-00000.arrow"
    table = one.to_arrow()
    lengths = table.column("num_tokens").to_pylist()
    assert set(lengths[:-1]) == {SEQ_LEN} and 0 < lengths[-1] < SEQ_LEN  # one short row
    tail = pa.ipc.open_stream(pa.memory_map(str(one.path / "shards" / "tail-00000.arrow")))
    batches = list(tail)
    assert len(batches) == 1  # the tails' few rows each are joined, not a batch per partition
    tail_table = pa.Table.from_batches(batches)
    assert tail_table.num_rows >= 2  # several partitions' tails, packed together
    packing = m["packing"]
    assert packing == {
        "kind": "tokens",
        "seq_len": SEQ_LEN,
        "tokens": m["tokens"],
        "tokens_in_full_rows": m["tokens"] - lengths[-1],
        "tail_tokens": sum(tail_table.column("num_tokens").to_pylist()),
        "tokens_lost": lengths[-1],
        "lost_fraction": round(lengths[-1] / m["tokens"], 9),
        "tail_shards": ["shards/tail-00000.arrow"],
    }
    # every token of every document is in the version, once (sum over rows == documents)
    plain = curate.run(write_recipe(corpus_dir, name="plain", output={"root": "out-p", "fsync": False},
                                    stages=[{"tokenize": {"source": TOKENIZER}}]))  # fmt: skip
    rows = plain.to_arrow()
    want = dict(
        zip(rows.column("id").to_pylist(), rows.column("input_ids").to_pylist(), strict=True)
    )
    assert documents_in(table) == want
    assert m["tokens"] == plain.manifest["tokens"] == packing["tokens_in_full_rows"] + lengths[-1]
    assert m["counts"]["written"] == 1500 == sum(s["documents"] for s in m["shards"])
    # tails in partition (input) order: their documents' numbers only grow
    order = [int(d[1:]) for row in tail_table.column("doc_ids").to_pylist() for d in row]
    assert order == sorted(order) and len(set(order)) >= 2
    # the loader serves the tail shard's full rows, and skips only the short one
    blocks = open_tokens(one.path).blocks(shuffle=False)
    assert len(blocks) == len(lengths) - 1 == packing["tokens_in_full_rows"] // SEQ_LEN
    assert blocks[len(blocks) - 1].tolist() == table.column("input_ids")[-2].as_py()
    assert len(open_tokens(one.path).rows(shuffle=False)) == len(lengths)
    # curate verify checks the tail shard like any other
    assert verify(one.path) == []


def test_the_tail_shard_is_verified_like_any_shard(corpus_dir: Path, tmp_path: Path) -> None:
    import shutil

    from conftest import writable

    version = curate.run(packed_recipe(corpus_dir, "out-1", workers=1))
    copy = tmp_path / "copy"
    shutil.copytree(version.path, copy)
    writable(copy)
    flip_byte(copy / "shards" / "tail-00000.arrow")
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["packing"]["tokens_lost"] -= 1  # counts that no longer add up are reported too
    (copy / "manifest.json").write_text(json.dumps(manifest))
    assert verify(copy) == [
        "shards/tail-00000.arrow: sha256 differs from the manifest (content changed)",
        "packing: tokens in full rows and tokens lost do not add up to tokens",
    ]


def test_each_split_has_its_own_tail_shard(corpus_dir: Path) -> None:
    version = curate.run(
        packed_recipe(corpus_dir, "out-split", split={"validation": 0.2}, workers=2)
    )
    m = version.manifest
    assert m["packing"]["tail_shards"] == [
        "train/shards/tail-00000.arrow",
        "validation/shards/tail-00000.arrow",
    ]
    assert verify(version.path) == []
    lost = 0
    for split in ("train", "validation"):
        table = version.to_arrow(split)
        lengths = table.column("num_tokens").to_pylist()
        assert set(lengths[:-1]) == {SEQ_LEN} and 0 < lengths[-1] <= SEQ_LEN
        lost += lengths[-1] if lengths[-1] < SEQ_LEN else 0
        assert table.column("id").to_pylist()[-1].startswith(f"pack-{split}-tail-")
        tokens = open_tokens(version.path, split=split)
        assert len(tokens.blocks(shuffle=False)) == sum(1 for n in lengths if n == SEQ_LEN)
    assert m["packing"]["tokens_lost"] == lost
    assert m["splits"]["splits"]["validation"]["shards"] >= 2


def run_killed(recipe: Path, log: Path, kill_at: str | None) -> int:
    env = {**os.environ, "CURATE_PHASE_LOG": str(log)}
    if kill_at:
        env["CURATE_KILL_AT"] = kill_at
    proc = subprocess.run(
        [sys.executable, "-m", "curate.cli", "run", str(recipe), "--quiet"],
        env=env, capture_output=True, timeout=300, start_new_session=True,
    )  # fmt: skip
    assert proc.returncode in (0, -signal.SIGKILL), proc.stderr.decode()
    return proc.returncode


@pytest.mark.parametrize(
    "kill_at", ["shard_write:40", "shard_write:100", "checkpoint:5", "publish:1", "publish:2"]
)
def test_a_killed_packed_run_resumes_to_the_same_bytes(
    corpus_dir: Path, tmp_path: Path, kill_at: str
) -> None:
    reference = curate.run(packed_recipe(corpus_dir, "out-1", workers=1))
    recipe = packed_recipe(corpus_dir, str(tmp_path / "out-k"), workers=2)
    assert run_killed(recipe, tmp_path / "kill.log", kill_at) == -signal.SIGKILL
    staging = next((tmp_path / "out-k" / "packed").glob(".staging-*"))
    assert list(staging.glob("pass-0/part-*.json"))  # some partitions had completed
    assert run_killed(recipe, tmp_path / "resume.log", None) == 0
    latest = (tmp_path / "out-k" / "packed" / "LATEST").read_text().strip()
    resumed = json.loads((tmp_path / "out-k" / "packed" / latest / "manifest.json").read_text())
    assert [(s["path"], s["sha256"]) for s in resumed["shards"]] == shard_hashes(reference)
    assert resumed["packing"] == reference.manifest["packing"]

"""Packing whole conversations for fine-tuning: never split, lossless, bounded like HF's collator."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pytest

from curate.errors import CurateError
from curate.output.chat_packing import ChatPackSpec
from curate.stages.chat_template import ChatTemplateParams


def conversations(
    n: int, longest: int, seed: int = 0
) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, longest + 1, n)
    ids = [rng.integers(0, 30000, k).astype(np.uint16) for k in lengths]
    labels = [np.where(rng.random(len(t)) < 0.5, t.astype(np.int32), -100) for t in ids]
    return ids, [lab.astype(np.int32) for lab in labels], lengths


def batches(
    ids: list[np.ndarray], labels: list[np.ndarray], sizes: list[int], target: str = "labels"
) -> list[pa.RecordBatch]:
    out, i = [], 0
    for size in sizes:
        part = slice(i, i + size)
        offsets = pa.array(
            np.concatenate([[0], np.cumsum([len(t) for t in ids[part]])]), pa.int32()
        )
        flat_ids = np.concatenate(ids[part]) if size else np.empty(0, np.uint16)
        flat_lab = np.concatenate(labels[part]) if size else np.empty(0, np.int32)
        if target == "loss_mask":
            flat_lab = (flat_lab != -100).astype(np.uint8)
        out.append(
            pa.record_batch(
                {
                    "id": [f"c{j}" for j in range(i, i + size)],
                    "input_ids": pa.ListArray.from_arrays(offsets, pa.array(flat_ids)),
                    target: pa.ListArray.from_arrays(offsets, pa.array(flat_lab)),
                    "source": ["x"] * size,  # a metadata column: not carried into packed rows
                }
            )
        )
        i += size
    return out


def pack(parts: list[pa.RecordBatch], seq_len: int, target: str = "labels") -> tuple[pa.Table, int]:
    spec = ChatPackSpec(seq_len, pa.uint16(), target)
    packer = spec.start("0123456789abcdef")
    rows, ended = [], 0
    for b in parts:
        for r, n in packer.feed(b):
            rows.append(r)
            ended += n
    for r, n in packer.flush():
        rows.append(r)
        ended += n
    return pa.Table.from_batches(rows, spec.output_schema()), ended


@pytest.mark.parametrize("seq_len", [16, 64, 1000])
def test_rows_hold_whole_conversations_and_lose_nothing(seq_len: int) -> None:
    ids, labels, lengths = conversations(300, min(seq_len, 50))
    table, ended = pack(batches(ids, labels, [40, 0, 1, 100, 159]), seq_len)
    assert ended == 300
    assert sum(table.column("num_tokens").to_pylist()) == int(lengths.sum())
    rows = table.to_pylist()
    seen = []
    for row in rows:
        n = row["num_tokens"]
        assert len(row["input_ids"]) == len(row["labels"]) == len(row["position_ids"]) == n
        assert 0 < n <= seq_len
        cu = row["cu_seqlens"]
        assert cu[0] == 0 and cu[-1] == n and len(cu) == len(row["doc_ids"]) + 1
        for k, doc in enumerate(row["doc_ids"]):
            i = int(doc[1:])
            lo, hi = cu[k], cu[k + 1]
            assert row["input_ids"][lo:hi] == ids[i].tolist()  # decoded back: the same ids
            assert row["position_ids"][lo:hi] == list(range(hi - lo))
            # DataCollatorWithFlattening's convention: the first label of each is -100
            assert row["labels"][lo:hi] == [-100, *labels[i][1:].tolist()]
            seen.append(i)
    assert seen == list(range(300))  # input order, each conversation exactly once
    # next-fit: a row ends only when the next conversation would not fit
    for row, nxt in itertools.pairwise(rows):
        first_next = int(nxt["doc_ids"][0][1:])
        assert row["num_tokens"] + lengths[first_next] > seq_len
    assert rows[0]["id"] == "pack-0123456789abcdef-000000000"


def test_rows_do_not_depend_on_batching() -> None:
    ids, labels, _ = conversations(200, 40, seed=3)
    whole, _ = pack(batches(ids, labels, [200]), 64)
    single, _ = pack(batches(ids, labels, [1] * 200), 64)
    assert whole.equals(single)


def test_loss_mask_is_zero_at_each_conversation_start() -> None:
    ids, labels, _ = conversations(50, 20, seed=5)
    table, _ = pack(batches(ids, labels, [50], target="loss_mask"), 32, target="loss_mask")
    assert table.schema.field("loss_mask").type == pa.list_(pa.uint8())
    for row in table.to_pylist():
        cu = row["cu_seqlens"]
        for k, doc in enumerate(row["doc_ids"]):
            want = (labels[int(doc[1:])] != -100).astype(int).tolist()
            assert row["loss_mask"][cu[k] : cu[k + 1]] == [0, *want[1:]]


def test_a_conversation_longer_than_a_row_is_refused() -> None:
    ids, labels, _ = conversations(5, 40, seed=1)
    with pytest.raises(CurateError, match="longer than seq_len"):
        pack(batches(ids, labels, [5]), int(max(len(t) for t in ids)) - 1)


def test_pack_sets_max_len_and_refuses_a_longer_one() -> None:
    params = ChatTemplateParams(source="t", pack={"seq_len": 512})  # type: ignore[arg-type]
    assert params.max_len == 512 and params.model_dump()["max_len"] == 512
    assert ChatTemplateParams(source="t", max_len=100, pack={"seq_len": 512}).max_len == 100  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"longer than pack\.seq_len"):
        ChatTemplateParams(source="t", max_len=600, pack={"seq_len": 512})  # type: ignore[arg-type]

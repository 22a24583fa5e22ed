"""Packed fine-tuning rows end to end: whole conversations, decoded back, split, deterministic.

A run of the chat_template stage with `pack` and `split` on a few hundred varied
conversations (sample_data/chat's ChatML tokenizer), checked against the same run
without packing: every conversation's slice of a packed row holds exactly its ids and
decodes to exactly its rendered text; labels keep the unpacked labels except the
first position of each conversation (-100, as `DataCollatorWithFlattening`);
`position_ids` restart and `cu_seqlens` bound each conversation; token sums agree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import pytest
import tokenizers
import yaml
from chat_fixtures import conversations
from conftest import REPO, write_jsonl

import curate
from curate.loader import open_tokens
from curate.stages.base import StageContext
from curate.stages.chat_template import ChatTemplate, ChatTemplateParams
from curate.verify import verify

TOKENIZER = REPO / "sample_data" / "chat" / "tokenizer"
SEQ_LEN = 1536


def build(tmp: Path, root: str, chat: dict[str, Any], workers: int = 1) -> curate.Version:
    recipe = {
        "name": "sft",
        "inputs": ["data/*.jsonl"],
        "id_field": "id",
        "chat": {"shape": "messages"},
        "partition_size": "40KB",
        "stages": [{"chat_template": {"source": str(TOKENIZER), **chat}}],
        "split": {"validation": 0.1},
        "output": {"root": root, "fsync": False, "shard_size": "32KB"},
        "engine": {"workers": workers},
    }
    path = tmp / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return curate.run(path)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("sft")
    convs = conversations(400, seed=4)
    long = [{"role": "user", "content": "data " * 4000}, {"role": "assistant", "content": "ok"}]
    convs[7] = long  # far longer than a row: max_len (= seq_len) drops it, counted
    records = [{"id": f"c{i:03d}", "messages": m} for i, m in enumerate(convs)]
    write_jsonl(tmp / "data" / "a.jsonl", records[:250])
    write_jsonl(tmp / "data" / "b.jsonl", records[250:])
    return tmp


def test_packed_rows_hold_each_conversation_whole(data: Path) -> None:
    plain = build(data, "plain", {"max_len": SEQ_LEN})
    packed = build(data, "packed", {"pack": {"seq_len": SEQ_LEN}})
    assert packed.manifest["recipe"]["stages"][0]["chat_template"]["max_len"] == SEQ_LEN
    stage = packed.manifest["stages"][0]
    assert stage["removed"] == {"too_long": 1}  # counted, never split across rows
    assert stage["details"]["pack"]["kind"] == "conversations"
    assert packed.counts["written"] == plain.counts["written"] == 399
    assert verify(packed.path) == []
    packing = packed.manifest["packing"]  # partitions' open rows: one tail shard per split
    assert packing["kind"] == "conversations" and packing["tokens_lost"] == 0
    assert packing["tail_shards"] == [
        f"{s}/shards/tail-00000.arrow" for s in ("train", "validation")
    ]
    assert packing["tokens_in_full_rows"] is None and packing["tail_tokens"] > 0
    messages = {
        json.loads(line)["id"]: json.loads(line)["messages"]
        for name in ("a", "b")
        for line in (data / "data" / f"{name}.jsonl").read_text().splitlines()
    }
    stage_obj = ChatTemplate(ChatTemplateParams(source=str(TOKENIZER)), StageContext())
    tok = tokenizers.Tokenizer.from_file(str(TOKENIZER / "tokenizer.json"))
    for split in ("train", "validation"):
        reference = {r["id"]: r for r in plain.to_arrow(split).to_pylist()}
        rows = packed.to_arrow(split).to_pylist()
        assert sum(r["num_tokens"] for r in rows) == sum(
            r["num_tokens"] for r in reference.values()
        )
        seen = []
        for row in rows:
            assert row["num_tokens"] <= SEQ_LEN and row["id"].startswith(f"pack-{split}-")
            cu = row["cu_seqlens"]
            assert cu[0] == 0 and cu[-1] == row["num_tokens"] == len(row["input_ids"])
            for k, doc in enumerate(row["doc_ids"]):
                lo, hi = cu[k], cu[k + 1]
                ids = row["input_ids"][lo:hi]
                assert ids == reference[doc]["input_ids"]
                text = tok.decode(ids, skip_special_tokens=False)
                assert text == stage_obj.render(messages[doc])[0]  # decoded back: its own text
                assert row["labels"][lo:hi] == [-100, *reference[doc]["labels"][1:]]
                assert row["position_ids"][lo:hi] == list(range(hi - lo))
                seen.append(doc)
        assert sorted(seen) == sorted(reference)  # each conversation once, none lost
        assert max(len(r["doc_ids"]) for r in rows) >= 2  # rows do hold several
    ds = datasets.load_from_disk(str(packed.path))
    assert ds["train"].features["position_ids"].feature.dtype == "int32"
    tokens = open_tokens(packed.path, split="validation", tokenizer=TOKENIZER)
    table = tokens.dataset()[:3]
    assert str(table.column("input_ids").type.value_type) == "uint16"  # stored types, no widening
    with pytest.raises(curate.CurateError, match="whole conversations"):
        tokens.blocks(SEQ_LEN)


def test_packed_split_rows_do_not_depend_on_workers(data: Path) -> None:
    one = build(data, "w1", {"pack": {"seq_len": 1200}, "mask": "loss_mask"}, workers=1)
    two = build(data, "w2", {"pack": {"seq_len": 1200}, "mask": "loss_mask"}, workers=2)
    assert [(s["path"], s["sha256"]) for s in one.manifest["shards"]] == [
        (s["path"], s["sha256"]) for s in two.manifest["shards"]
    ]
    assert sum(i["partitions"] for i in one.manifest["inputs"]) >= 2
    rows = one.to_arrow("train").to_pylist()
    assert all(r["loss_mask"][c] == 0 for r in rows for c in r["cu_seqlens"][:-1])


def test_loader_rows_are_views_split_among_ranks_and_resumable(data: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    version = build(data, "rows", {"pack": {"seq_len": 1200}})
    tokens = open_tokens(version.path, tokenizer=TOKENIZER)  # split: train by default
    table = version.to_arrow("train")
    first = tokens.rows(seed=3, shuffle=False)[0]  # indexing: no copy, even under torch
    assert sorted(first) == ["cu_seqlens", "input_ids", "labels", "position_ids"]
    assert first["input_ids"].dtype == np.uint16 and first["labels"].dtype == np.int32
    assert first["input_ids"].base is not None  # a view of the memory-mapped shard
    assert first["input_ids"].tolist() == table.column("input_ids")[0].as_py()
    world = 3
    per_rank = [list(tokens.rows(seed=3, rank=r, world_size=world)) for r in range(world)]
    assert len({len(p) for p in per_rank}) == 1  # every rank the same number
    seen = [tuple(row["input_ids"]) for p in per_rank for row in p]
    assert len(set(seen)) == len(seen) == table.num_rows // world * world
    rows = tokens.rows(seed=3, rank=1, world_size=world)
    assert [tuple(r["labels"]) for r in rows.torch()][2:] == [
        tuple(r["labels"])
        for r in tokens.rows(seed=3, rank=1, world_size=world, position=2 * world)
    ]

    def flatten(batch: list[dict[str, np.ndarray]]) -> dict[str, Any]:
        return {k: torch.from_numpy(np.concatenate([r[k] for r in batch])).long()[None]
                for k in ("input_ids", "labels", "position_ids")}  # fmt: skip

    loader = DataLoader(tokens.rows(seed=3).torch(batch_size=2), batch_size=2,
                        collate_fn=flatten, num_workers=2)  # fmt: skip
    batches = list(loader)
    assert sum(b["input_ids"].shape[1] for b in batches) == tokens.num_tokens
    assert all((b["position_ids"] == 0).sum() >= 2 for b in batches[:-1])

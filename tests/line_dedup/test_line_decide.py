"""line_dedup's decision against a plain Python version, over several partitions, with the
collective cutting its shuffles into many buckets or none, and the summaries arriving in
any order: the same documents change the same way."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest
from line_reference import line_dedup

from curate.collective.local import LocalSummaries
from curate.io.batches import ID, ORDER, order_column
from curate.stages.base import dropping, keeping
from curate.stages.line_dedup import LineDedup, LineDedupParams

POOL = ["Home | About", "Cookies help us", "  Home | About  ", "x", "Footer © 2024", "", " "]


def random_docs(rng: random.Random, n: int) -> list[dict[str, Any]]:
    docs = []
    for i in range(n):
        lines = [rng.choice(POOL) if rng.random() < 0.6 else f"own {i}.{j}"
                 for j in range(rng.randrange(0, 7))]  # fmt: skip
        sep = "\n\n" if rng.random() < 0.3 else "\n"
        docs.append({"id": f"d{i}", "text": sep.join(lines)})
    return docs


def run(docs: list[dict[str, Any]], params: dict[str, Any], parts: int, budget: int,
        shuffle: random.Random) -> tuple[list[dict[str, Any]], list[str]]:  # fmt: skip
    stage = LineDedup(LineDedupParams(**params))
    size = -(-len(docs) // parts)
    batches = []
    for p in range(parts):
        chunk = docs[p * size : (p + 1) * size]
        batches.append(
            pa.record_batch(
                {
                    ID: [d["id"] for d in chunk],
                    "text": [d["text"] for d in chunk],
                    ORDER: pa.array(order_column(p, 0, len(chunk)), pa.uint64()),
                }
            )
        )
    summaries = [stage.summarize(b) for b in batches]
    shuffle.shuffle(summaries)
    held = LocalSummaries.from_tables(summaries)
    held.budget = budget
    decision = stage.decide(held).collect(stage.decision_schema())
    drops, changes = dropping(decision), keeping(decision).select([ID, "remove_units"])
    kept = []
    for b in batches:
        out = stage.apply(b, drops.column(ID), changes).batch
        ids, texts = out.column(ID).to_pylist(), out.column("text").to_pylist()
        kept += [{"id": i, "text": t} for i, t in zip(ids, texts, strict=True)]
    return kept, sorted(drops.column(ID).to_pylist(), key=lambda i: int(i[1:]))


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"keep_first": False},
        {"max_documents": 3},
        {"unit": "paragraph"},
        {"unit": "paragraph", "keep_first": False, "max_documents": 2},
        {"min_chars": 3},
    ],
)
def test_the_decision_matches_plain_python(params: dict[str, Any]) -> None:
    rng = random.Random(11)
    docs = random_docs(rng, 300)
    expected = line_dedup(docs, **params)
    for parts, budget in ((1, 256 << 20), (4, 256 << 20), (5, 2000)):  # 2000: many buckets
        assert run(docs, params, parts, budget, random.Random(parts)) == expected


def test_nothing_repeated_nothing_decided() -> None:
    docs = [{"id": f"d{i}", "text": f"only mine {i}\nand {i}"} for i in range(20)]
    assert run(docs, {}, 2, 256 << 20, random.Random(0)) == (docs, [])

"""A pass after a changed decision takes its map stages' work from the cache document by
document (`curate.cache.by_document`), and publishes what a build from scratch would.

A file inserted before the others brings copies of old documents, so every old
partition's exact_dedup decision changes; the stages after the decisions (pii, a filter,
tokenize) then compute only the documents the cache does not hold, and count out those
the new decisions drop, as the counts, statistics and examples of a build from scratch
show them.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from conftest import corpus, write_jsonl
from test_stage_cache import TOKENIZER, assert_same_as_scratch, build, caching, manifest

import curate
from curate.stages.examples import id_hash, key_of

STAGES: list[dict[str, Any]] = [
    {"normalize": {}},
    {"exact_dedup": {}},
    {"minhash_dedup": {"threshold": 0.8}},
    {"pii": {}},
    {"filter_length": {"min_words": 9}},
    {"tokenize": {"source": TOKENIZER}},
]


def recipe(per_reason: int, size: str = "3KB") -> dict[str, Any]:
    return {
        "name": "t",
        "inputs": ["data/*.jsonl"],
        "id_field": "id",
        "partition_size": "6KB",
        "batch_size": size,
        "stages": copy.deepcopy(STAGES),
        "output": {"root": "out", "fsync": False, "examples": {"per_reason": per_reason}},
        "engine": {"workers": 1},
    }


def documents() -> list[dict[str, Any]]:
    docs = corpus(240, dup_every=9)
    for i in range(0, 240, 4):  # values the pii stage finds, in a quarter of them
        docs[i]["text"] += f" write to person{i}@example.com or call 212-555-{1000 + i:04d}"
    for i in range(3, 240, 11):  # short ones the filter after pii removes
        docs[i]["text"] = f"short note {i}"
    return docs


def documents_of(version: Path, position: int) -> tuple[int, int]:
    """(computed, reused) documents of the stage at `position`, as the manifest says."""
    cache = manifest(version)["stages"][position]["cache"]
    return cache["docs_computed"], cache["docs_reused"]


@pytest.mark.parametrize(("per_reason", "size"), [(20, "3KB"), (1, "6KB")])
def test_an_inserted_file_reuses_the_later_stages_document_by_document(
    tmp_path: Path, per_reason: int, size: str
) -> None:
    """Half the documents with PII values and some short ones are copied, so the old
    documents a new decision drops were often a stage call's chosen examples; with
    per_reason 1 and a chunk per partition, every call's choice is full and made again
    over what is left, and a document chosen now whose text the cache lacks makes its
    chunk computed whole."""
    docs = documents()
    write_jsonl(tmp_path / "data" / "b.jsonl", docs[:120])
    write_jsonl(tmp_path / "data" / "c.jsonl", docs[120:])
    build(tmp_path, recipe(per_reason, size))
    copied = sorted({*range(0, 240, 8), *range(3, 240, 22), *range(1, 240, 12)})  # pii, short
    early = [{"id": f"early{i}", "text": docs[i]["text"]} for i in copied]
    write_jsonl(tmp_path / "data" / "a.jsonl", early)  # read first: the old copies go
    second = build(tmp_path, recipe(per_reason, size))
    computed, reused = documents_of(second, 3)
    if per_reason == 20:
        assert reused > 150 and computed < reused, (computed, reused)
    assert documents_of(second, 5) == (computed, reused)  # one pass: pii, filter, tokenize
    assert_same_as_scratch(tmp_path, recipe(per_reason, size), second)


@pytest.mark.parametrize("change", ["inserted file", "threshold"])
def test_a_pass_that_replayed_some_stages_serves_by_document_next_time(
    tmp_path: Path, change: str
) -> None:
    """A tokenizer change replays pii and the filter and computes tokenize; a decision that
    changes after it (a file inserted first, a lower MinHash threshold) then takes pii's,
    the filter's and the new tokenize's work document by document from those entries. The
    pass that replayed a prefix used to leave its map family unnamed, and the next decision
    change ran pii on every document again."""
    docs = documents()
    for i in range(0, 240, 5):  # near copies a lower threshold also drops
        docs[i + 1]["text"] = docs[i]["text"] + " and one more clause"
    write_jsonl(tmp_path / "data" / "b.jsonl", docs[:120])
    write_jsonl(tmp_path / "data" / "c.jsonl", docs[120:])
    first = recipe(20)
    build(tmp_path, first)
    retokenized = copy.deepcopy(first)
    retokenized["stages"][5]["tokenize"]["keep_text"] = True
    replayed = build(tmp_path, retokenized)
    assert documents_of(replayed, 3) == (None, None)  # pii replayed whole, not by document
    said = caching(replayed)
    partitions = said[5]["ran"]
    assert partitions > 1 and [c["reused"] for c in said[3:6]] == [partitions, partitions, 0]
    later = copy.deepcopy(retokenized)
    if change == "inserted file":
        early = [{"id": f"early{i}", "text": docs[i]["text"]} for i in range(0, 240, 8)]
        write_jsonl(tmp_path / "data" / "a.jsonl", early)  # read first: the old copies go
    else:
        later["stages"][2]["minhash_dedup"]["threshold"] = 0.5
    third = build(tmp_path, later)

    def seen(version: Path) -> list[int]:
        return [s[k] for s in manifest(version)["stages"][1:3] for k in ("docs_in", "docs_out")]

    assert seen(third) != seen(replayed)  # the decisions are new
    computed, reused = documents_of(third, 3)
    assert reused > 100 and computed < reused, (computed, reused)
    assert documents_of(third, 5) == (computed, reused)
    assert_same_as_scratch(tmp_path, later, third)


def ids_in_hash_order(n: int) -> list[str]:
    """n ids, by increasing `id_hash` (the order examples are chosen in)."""
    names = [f"doc{i}" for i in range(4 * n)]
    return sorted(names, key=id_hash)[:n]


def test_an_example_the_new_decision_drops_is_replaced_by_the_next_one(tmp_path: Path) -> None:
    """The first two ids by hash are documents with an e-mail address, in one chunk; the
    first is copied into a file read first, so the new decision drops it: the example of
    the pii stage's change becomes the second, whose text only a computation gives."""
    first, second, *rest = ids_in_hash_order(12)
    docs = [
        {"id": name, "text": f"a note numbered {i} for the file, write to p{i}@example.com"}
        for i, name in enumerate([first, second, *rest[:4]])
    ] + [
        {"id": name, "text": f"plain words about topic {i} " * 3} for i, name in enumerate(rest[4:])
    ]
    docs.sort(key=lambda d: d["id"])
    write_jsonl(tmp_path / "data" / "b.jsonl", docs)
    build(tmp_path, recipe(1, "64KB"))
    copy_of_first = next(d["text"] for d in docs if d["id"] == first)
    write_jsonl(tmp_path / "data" / "a.jsonl", [{"id": "zz-early", "text": copy_of_first}])
    again = build(tmp_path, recipe(1, "64KB"))
    shown = curate.open(again).examples().to_pylist()
    changed = [e for e in shown if e["reason"] == "changed:EMAIL_ADDRESS"]
    assert [e["key"] for e in changed] == [key_of(second)]
    assert_same_as_scratch(tmp_path, recipe(1, "64KB"), again)

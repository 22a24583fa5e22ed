"""New data every week: a run after inputs gain or change files reruns stages only for the
partitions they affect, and publishes what a build from scratch would (issue 18, point 1).

Barriers decide again over every partition's summary, taking old partitions' hashes and
signatures from the stage cache, so a new document may change an old decision: a
near-duplicate bridging two MinHash clusters removes a document of an old file, and a file
inserted before the others in input order moves which copy of a duplicate is kept.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from conftest import corpus, write_jsonl
from test_stage_cache import assert_same_as_scratch, build, caching, manifest

STAGES: list[dict[str, Any]] = [
    {"normalize": {}},
    {"exact_dedup": {}},
    {"minhash_dedup": {"threshold": 0.7, "verify": "exact"}},
    {"filter_length": {"min_words": 4}},
]


def recipe() -> dict[str, Any]:
    return {
        "name": "t",
        "inputs": ["data/*.jsonl"],
        "id_field": "id",
        "partition_size": "4KB",
        "batch_size": "2KB",
        "stages": copy.deepcopy(STAGES),
        "output": {"root": "out", "fsync": False},
        "engine": {"workers": 1},
    }


def words(start: int, stop: int) -> str:
    return " ".join(f"bridge{i}" for i in range(start, stop))


def test_a_bridging_near_duplicate_in_a_new_file_removes_an_old_document(tmp_path: Path) -> None:
    docs = corpus(240, dup_every=7)
    docs[20] = {"id": "A", "text": words(1, 41)}  # A and B: Jaccard 0.57, below 0.7
    docs[200] = {"id": "B", "text": words(11, 51)}
    write_jsonl(tmp_path / "data" / "a.jsonl", docs[:120])
    write_jsonl(tmp_path / "data" / "b.jsonl", docs[120:])
    first = build(tmp_path, recipe())
    assert "B" not in {r["id"] for r in rejected(first)}
    # C is 0.76 from A and from B: one cluster, A first in input order, B goes
    write_jsonl(tmp_path / "data" / "c.jsonl", [{"id": "C", "text": words(6, 46)}])
    second = build(tmp_path, recipe())
    assert {"B", "C"} <= {r["id"] for r in rejected(second)}
    parts = len(manifest(second)["partitions"])
    normalize, _, minhash, after = caching(second)
    assert normalize is not None and (normalize["ran"], normalize["reused"]) == (1, parts - 1)
    assert minhash is not None and minhash["ran"] == 1  # only the new file's signatures
    assert after is not None and after["ran"] == 2  # the new partition and B's
    assert_same_as_scratch(tmp_path, recipe(), second)


def test_a_file_inserted_before_the_others_keeps_its_copy_of_a_duplicate(tmp_path: Path) -> None:
    docs = corpus(240, dup_every=7)
    write_jsonl(tmp_path / "data" / "b.jsonl", docs[:120])
    write_jsonl(tmp_path / "data" / "c.jsonl", docs[120:])
    first = build(tmp_path, recipe())
    kept = docs[130]  # in c.jsonl: its copy in a.jsonl, read first, is kept now
    assert kept["id"] not in {r["id"] for r in rejected(first)}
    write_jsonl(tmp_path / "data" / "a.jsonl", [{"id": "early", "text": kept["text"]}])
    second = build(tmp_path, recipe())
    assert kept["id"] in {r["id"] for r in rejected(second)}
    parts = len(manifest(second)["partitions"])
    normalize = caching(second)[0]
    assert normalize is not None and (normalize["ran"], normalize["reused"]) == (1, parts - 1)
    assert_same_as_scratch(tmp_path, recipe(), second)


def rejected(version: Path) -> list[dict[str, Any]]:
    import pyarrow as pa

    rows: list[dict[str, Any]] = []
    for f in manifest(version)["rejected"]:
        with pa.ipc.open_stream(str(version / f["path"])) as reader:
            rows += reader.read_all().to_pylist()
    return rows


def test_removing_a_file_reruns_only_what_it_affected(tmp_path: Path) -> None:
    docs = corpus(240, dup_every=7)
    write_jsonl(tmp_path / "data" / "a.jsonl", docs[:80])
    write_jsonl(tmp_path / "data" / "b.jsonl", docs[80:160])
    write_jsonl(tmp_path / "data" / "c.jsonl", docs[160:])
    build(tmp_path, recipe())
    (tmp_path / "data" / "c.jsonl").unlink()
    second = build(tmp_path, recipe())
    cache = caching(second)
    assert cache[0] is not None and cache[0]["ran"] == 0  # nothing read anew
    assert json.dumps(manifest(second)["counts"])
    assert_same_as_scratch(tmp_path, recipe(), second)

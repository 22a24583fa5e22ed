"""decontaminate: n-gram overlap with benchmark files, normalization, commonness, cut, manifest."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import write_jsonl, write_recipe

from curate.decontam.words import ngram_keys, normalized_words
from curate.errors import CurateError
from curate.pipeline import Pipeline

QUESTION = (
    "A train leaves the station at noon travelling at sixty miles per hour; how far has it "
    "gone by three o'clock in the afternoon?"
)
TEMPLATE = "Answer the following question with a single number and nothing else please thanks"
LICENCE = (
    "Permission is hereby granted free of charge to any person obtaining a copy of this software"
)


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    rows = [{"question": QUESTION, "choices": ["180 miles", "120 miles"]}]
    rows += [
        {"question": f"{TEMPLATE} item {i} about topic {i * 7} here", "choices": []}
        for i in range(12)
    ]
    rows += [{"question": LICENCE + " and more words after it", "choices": []}]
    write_jsonl(tmp_path / "bench" / "quiz.jsonl", rows)
    pq.write_table(
        pa.table(
            {
                "text": [
                    "The quick brown fox jumps over the lazy dog near the quiet river bank today"
                ]
            }
        ),
        tmp_path / "bench" / "fox.parquet",
    )
    (tmp_path / "bench" / "licence.txt").write_text(LICENCE)
    return tmp_path


def stages(**extra: object) -> list[dict[str, object]]:
    params = {
        "benchmarks": [
            {"name": "quiz", "path": "bench/quiz.jsonl", "fields": ["question", "choices"]},
            {"name": "fox", "path": "bench/fox.parquet"},
        ],
        "ignore": ["bench/licence.txt"],
        **extra,
    }
    return [{"decontaminate": params}]


DOCS = [
    # punctuation, case and spacing differ: still the same 13 words in a row
    {
        "id": "leak",
        "text": "Intro text. " + QUESTION.upper().replace(";", " —").replace(" ", "  ") + " More.",
    },
    {
        "id": "fox",
        "text": "Story: the QUICK brown fox jumps over the lazy dog, near the quiet river bank today!",
    },
    {"id": "template", "text": TEMPLATE + " and then some of our own unrelated words follow"},
    {"id": "licence", "text": LICENCE + " subject to the following conditions"},
    {
        "id": "clean",
        "text": "Nothing in this document overlaps any benchmark at all, it is about gardening.",
    },
    {"id": "short", "text": "A train leaves the station at noon."},
]


def run(project: Path, **extra: object):
    write_jsonl(project / "data" / "a.jsonl", DOCS)
    from curate.runner import run as run_recipe

    return run_recipe(write_recipe(project, stages=stages(**extra)))


def test_drop(bench: Path) -> None:
    version = run(bench)
    assert sorted(version.to_arrow().column("id").to_pylist()) == [
        "clean",
        "licence",
        "short",
        "template",
    ]
    manifest = json.loads((Path(version.path) / "manifest.json").read_text())
    record = manifest["stages"][0]
    assert record["removed"] == {"benchmark:fox": 1, "benchmark:quiz": 1}
    assert record["counters"] == {"benchmark:fox": 1, "benchmark:quiz": 1}
    details = record["details"]
    assert [b["name"] for b in details["benchmarks"]] == ["quiz", "fox"]
    assert all(len(b["sha256"]) == 64 and b["n"] == 13 for b in details["benchmarks"])


def test_cut_keeps_the_rest(bench: Path) -> None:
    version = run(bench, action="cut")
    texts = dict(
        zip(*(version.to_arrow().column(c).to_pylist() for c in ("id", "text")), strict=True)
    )
    assert texts["leak"].startswith("Intro text.") and texts["leak"].endswith("More.")
    assert "STATION" not in texts["leak"]
    assert texts["fox"] == "Story:"
    manifest = json.loads((Path(version.path) / "manifest.json").read_text())
    assert manifest["stages"][0]["changed"] == 2


def test_benchmark_edit_makes_a_new_version(bench: Path) -> None:
    first = run(bench)
    with open(bench / "bench" / "quiz.jsonl", "a") as f:
        f.write(
            json.dumps(
                {
                    "question": "a brand new question that nobody has seen before today ok",
                    "choices": [],
                }
            )
            + "\n"
        )
    second = run(bench)
    assert second.name != first.name


def test_n_and_max_items(bench: Path) -> None:
    # with n=5 the short document's "a train leaves the station" is evidence too
    version = run(bench, n=5, max_items=20)
    kept = version.to_arrow().column("id").to_pylist()
    assert "short" not in kept and "template" not in kept


def test_normalization_folds_case_punctuation_and_space() -> None:
    a = normalized_words(pa.array(["Hello, World! It’s—a  test…", "hello world it s a test"]))
    assert list(a.counts) == [6, 6]
    keys, first = ngram_keys(a, 6)
    assert len(keys) == 2 and keys[0] == keys[1] and list(first) == [0, 6]


def test_missing_file_and_field(bench: Path) -> None:
    with pytest.raises(CurateError, match=r"no file|cannot read .*nope\.jsonl"):
        Pipeline().add(
            "decontaminate", benchmarks=[{"name": "x", "path": str(bench / "nope.jsonl")}]
        ).process([{"text": "a"}])
    with pytest.raises(CurateError, match="has no field 'answer'"):
        Pipeline().add(
            "decontaminate",
            benchmarks=[
                {"name": "q", "path": str(bench / "bench" / "quiz.jsonl"), "fields": ["answer"]}
            ],
        ).process([{"text": "a"}])


def test_lookup_of_empty_batches() -> None:
    from curate.decontam.index import NGramIndex

    index = NGramIndex(np.zeros(0, np.uint64), np.zeros(0, np.uint64), [])
    assert index.lookup(np.array([1, 2], np.uint64)).tolist() == [0, 0]

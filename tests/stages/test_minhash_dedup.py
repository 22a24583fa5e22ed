"""minhash_dedup as a stage: input order decides, empties stay, runs anywhere in a recipe."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import write_jsonl, write_recipe

import curate
from curate.collective.local import LocalSummaries
from curate.minhash.planted import planted_corpus
from curate.recipe import build_stage
from curate.stages.base import DECISION_SCHEMA, ORDER
from curate.stages.minhash_dedup import MinHashDedup, MinHashDedupParams

TOKENIZER = Path(__file__).resolve().parents[2] / "sample_data" / "tokenizer"
TEXT = " ".join(f"word{i} token{i % 7}" for i in range(60))


def batch(ids: list[str], texts: list[str], orders: list[int]) -> pa.RecordBatch:
    return pa.record_batch(
        {"id": ids, "text": texts, ORDER: pa.array(np.array(orders, dtype=np.uint64))}
    )


@pytest.mark.parametrize("verify", ["exact", "estimate"])
def test_first_in_input_order_is_kept_whatever_arrives_first(verify: str) -> None:
    stage = MinHashDedup(MinHashDedupParams(verify=verify))
    late = batch(
        ["c", "d"], [TEXT + " extra", "unrelated text " * 20], [(1 << 40) + 0, (1 << 40) + 1]
    )
    early = batch(["a", "b"], ["something else entirely " * 9, TEXT], [0, 1])
    summaries = LocalSummaries.from_tables([stage.summarize(late), stage.summarize(early)])
    decision = stage.decide(summaries).collect(DECISION_SCHEMA)
    rows = decision.select(["id", "reason", "duplicate_of"]).to_pylist()
    assert rows == [{"id": "c", "reason": "near_duplicate", "duplicate_of": "b"}]
    assert decision.column(ORDER).to_pylist() == [1 << 40]
    assert 0.8 <= decision.column("similarity")[0].as_py() < 1.0
    assert stage.apply(late, decision.column("id")).batch.column("id").to_pylist() == ["d"]
    details = stage.describe()
    assert details["clusters"] == 1 and details["removed"] == 1
    assert details["cluster_sizes"] == {"2": 1}


def test_empty_and_whitespace_documents_are_never_clustered() -> None:
    stage = MinHashDedup(MinHashDedupParams())
    b = batch(["a", "b", "c", "d", "e"], ["", " ", "\n\t", "", "\u3000"], [0, 1, 2, 3, 4])
    summary = stage.summarize(b)
    assert summary.num_rows == 0
    assert stage.decide(LocalSummaries.from_tables([summary])).count() == 0


def test_short_documents_have_one_shingle_and_can_match() -> None:
    result = (
        curate.Pipeline()
        .add("minhash_dedup")
        .process([{"id": "x", "text": "Hello  world"}, {"id": "y", "text": "hello world"}])
    )
    assert result.table.column("id").to_pylist() == ["x"]
    assert result.rejected.column("duplicate_of").to_pylist() == ["x"]


def test_character_shingles() -> None:
    result = (
        curate.Pipeline()
        .add("minhash_dedup", unit="char", size=4)
        .process(
            [
                {"text": "数据去重需要字符级别的分片" * 3},
                {"text": "数据去重需要字符级别的分片" * 3 + "。"},
            ]
        )
    )
    assert result.table.num_rows == 1


def test_parameters_are_checked() -> None:
    with pytest.raises(Exception, match="bands and rows go together"):
        build_stage({"minhash_dedup": {"bands": 8}}, 0)
    with pytest.raises(Exception, match="exceeds num_perm"):
        build_stage({"minhash_dedup": {"bands": 20, "rows": 8}}, 0)
    stage = MinHashDedup(MinHashDedupParams(bands=16, rows=8))
    assert stage.band_shape() == (16, 8)
    assert MinHashDedup(MinHashDedupParams()).band_shape() == (17, 7)


def test_importing_curate_and_the_registry_does_not_import_datasketch() -> None:
    code = (
        "import sys, curate, curate.stages.registry, curate.stages.minhash_dedup\n"
        "print('datasketch' in sys.modules, 'scipy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def planted_files(folder: Path) -> list[dict[str, str]]:
    docs = [{"id": d["id"], "text": d["text"]} for d in planted_corpus(60, seed=5).docs]
    docs += [dict(docs[3], id="exact-copy")]  # an exact copy too
    half = len(docs) // 2
    write_jsonl(folder / "data" / "a.jsonl", docs[:half])
    write_jsonl(folder / "data" / "b.jsonl", docs[half:])
    return docs


def test_one_and_two_workers_give_identical_output_and_the_manifest_explains(
    tmp_path: Path,
) -> None:
    planted_files(tmp_path)
    stages = [{"normalize": {}}, {"exact_dedup": {}}, {"minhash_dedup": {}}]
    versions = []
    for workers in (1, 2):
        recipe = write_recipe(
            tmp_path,
            stages=stages,
            partition_size="8KB",
            output={"root": f"out-{workers}", "fsync": False},
            engine={"workers": workers},
        )
        versions.append(curate.run(recipe))
    one, two = versions
    assert [s["sha256"] for s in one.manifest["shards"]] == [
        s["sha256"] for s in two.manifest["shards"]
    ]
    assert [f["sha256"] for f in one.manifest["rejected"]] == [
        f["sha256"] for f in two.manifest["rejected"]
    ]
    removed = one.manifest["counts"]["removed"]
    assert removed["1:exact_dedup"]["duplicate"] >= 1
    assert removed["2:minhash_dedup"]["near_duplicate"] > 20
    record = one.manifest["stages"][2]
    details = record["details"]
    assert (details["bands"], details["rows"]) == (17, 7)
    assert details["verify"] == "exact" and details["scheme"].startswith("datasketch affine32")
    assert details["removed"] == removed["2:minhash_dedup"]["near_duplicate"]
    assert (
        details["clusters"] >= 1 and sum(details["cluster_sizes"].values()) == details["clusters"]
    )
    assert record["software"]["shingle_hash"] == "xxh32"
    rejected = pa.concat_tables(
        [pa.ipc.open_stream(one.path / f["path"]).read_all() for f in one.manifest["rejected"]]
    )
    near = rejected.filter(pa.compute.equal(rejected.column("stage"), "minhash_dedup"))
    kept = set(one.to_arrow().column("id").to_pylist())
    assert set(near.column("duplicate_of").to_pylist()) <= kept
    assert all(0 < s <= 1 for s in near.column("similarity").to_pylist())


@pytest.mark.parametrize(
    "stages",
    [
        [{"minhash_dedup": {"verify": "estimate"}}, {"normalize": {}}, {"exact_dedup": {}}],
        [{"exact_dedup": {}}, {"normalize": {"form": "NFKC"}}, {"minhash_dedup": {}}],
        [{"minhash_dedup": {}}],
        [{"normalize": {}}, {"minhash_dedup": {}}, {"tokenize": {"source": str(TOKENIZER)}}],
    ],
)
def test_any_position_in_a_recipe(tmp_path: Path, stages: list[dict]) -> None:  # type: ignore[type-arg]
    docs = planted_files(tmp_path)
    version = curate.run(write_recipe(tmp_path, stages=stages))
    counts = version.manifest["counts"]
    assert counts["written"] + counts["removed_total"] == len(docs)
    near = sum(v.get("near_duplicate", 0) for k, v in counts["removed"].items())
    assert near > 20


def test_up_to_date_check_imports_neither_datasketch_nor_scipy(tmp_path: Path) -> None:
    planted_files(tmp_path)
    recipe = write_recipe(tmp_path, stages=[{"minhash_dedup": {}}])
    first = curate.run(recipe)
    code = (
        "import sys, curate\n"
        f"v = curate.run({str(recipe)!r})\n"
        "print(v.up_to_date, sorted({'datasketch', 'scipy'} & {m.split('.')[0] for m in sys.modules}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[0] == "True []"
    assert first.manifest["stages"][0]["software"]["datasketch"]


def test_similarity_is_the_exact_jaccard_with_the_kept_document() -> None:
    """rejected/'s `similarity` is the Jaccard similarity of the removed document's shingles
    with the kept one's (`duplicate_of`), exact with verify: exact. A document that joins a
    cluster through another member (a ~ b ~ c) can be below the threshold with the kept one:
    that is the number recorded, not an estimate that may fall on either side of it."""
    words = [f"w{i}" for i in range(300)]

    def changed(base: list[str], at: range, tag: str) -> list[str]:
        return [f"{tag}{i}" if i in at else w for i, w in enumerate(base)]

    a = words
    b = changed(a, range(10, 300, 50), "x")  # 6 words apart: 30 of 296 shingles differ
    c = changed(b, range(35, 300, 50), "y")  # 6 more; a ~ c is never a verified pair
    texts = [" ".join(t) for t in (a, b, c)]

    def shingles(text: str) -> set[tuple[str, ...]]:
        w = text.split()
        return {tuple(w[i : i + 5]) for i in range(len(w) - 4)}

    def jaccard(x: str, y: str) -> float:
        return len(shingles(x) & shingles(y)) / len(shingles(x) | shingles(y))

    assert jaccard(texts[0], texts[1]) >= 0.8 and jaccard(texts[1], texts[2]) >= 0.8
    assert jaccard(texts[0], texts[2]) < 0.8
    result = (
        curate.Pipeline()
        .add("minhash_dedup")
        .process([{"id": k, "text": t} for k, t in zip("abc", texts, strict=True)])
    )
    rows = {r["id"]: r for r in result.rejected.to_pylist()}
    assert sorted(rows) == ["b", "c"] and {r["duplicate_of"] for r in rows.values()} == {"a"}
    for k, text in (("b", texts[1]), ("c", texts[2])):
        assert rows[k]["similarity"] == pytest.approx(jaccard(texts[0], text), abs=1e-6)
    said = MinHashDedup(MinHashDedupParams()).describe()["similarity"]  # in the manifest
    assert said.startswith("rejected/: Jaccard similarity") and "exact" in said

"""statistics.json: in every version, listed and checked by its manifest, the same bytes
whatever the worker count, and consistent with the manifest's own counts."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from conftest import corpus, flip_byte, sealed, writable, write_jsonl, write_recipe

import curate
from curate.stats import document
from curate.verify import verify

REPO = Path(__file__).resolve().parents[2]
PLANTED = "Zebulon-Quixotic-7731"


def project(tmp_path: Path) -> None:
    docs = corpus(1200, dup_every=4)
    docs[5]["text"] = f"Call   {PLANTED} about\u00a0the  thing   now please ok"
    docs[6]["text"] = "  spaced     out    words here and more    "
    for i in range(40, 1200, 37):  # near-duplicates: one word more than an earlier document
        docs[i] = {"id": docs[i]["id"], "text": docs[i // 3]["text"] + " extra"}
    for i in range(3):
        write_jsonl(tmp_path / "data" / f"f{i}.jsonl", docs[i * 400 : (i + 1) * 400])


STAGES: list[dict[str, Any]] = [
    {"normalize": {}},
    {"filter_length": {"min_words": 6}},
    {"exact_dedup": {}},
    {"minhash_dedup": {"threshold": 0.7}},
    {"tokenize": {"source": str(REPO / "sample_data" / "tokenizer"), "eos": True}},
]


def build(tmp_path: Path, root: str, workers: int = 1, **output: Any) -> curate.Version:
    recipe = write_recipe(
        tmp_path,
        stages=STAGES,
        partition_size="16KB",
        output={"root": root, "fsync": False, **output},
        engine={"workers": workers},
    )
    return curate.run(recipe)


def test_statistics_are_byte_identical_across_workers_and_agree_with_the_manifest(
    tmp_path: Path,
) -> None:
    project(tmp_path)
    one, two = build(tmp_path, "out-1", 1), build(tmp_path, "out-2", 2)
    a = (one.path / document.NAME).read_bytes()
    assert a == (two.path / document.NAME).read_bytes()
    assert one.manifest["statistics"] == two.manifest["statistics"]
    assert sum(i["partitions"] for i in one.manifest["inputs"]) >= 6
    data = document.read(one.path)
    assert data is not None and data["format_version"] == document.FORMAT_VERSION
    assert PLANTED.encode() not in a  # counts and bins only, never text

    stages = data["stages"]
    for s, m in zip(stages, one.manifest["stages"], strict=True):
        assert (s["name"], s["documents_in"], s["documents_out"], s["removed"]) == (
            m["name"], m["docs_in"], m["docs_out"], m["removed"],
        )  # fmt: skip
        hist = s["histograms"]
        assert hist["length_in"]["n"] == s["documents_in"]
        assert hist["length_in"]["total"] == s["sums"]["characters_in"]
    for before, after in itertools.pairwise(stages):  # a stage reads what the last
        assert after["sums"]["characters_in"] == before["sums"]["characters_out"]  # wrote
    texts = [
        json.loads(line)["text"]
        for f in sorted((tmp_path / "data").glob("*.jsonl"))
        for line in f.read_text().splitlines()
    ]
    assert stages[0]["sums"]["characters_in"] == sum(len(t) for t in texts)
    normalize = stages[0]["sums"]
    assert normalize["characters_removed"] > 0  # the planted runs of spaces
    assert normalize["characters_in"] - normalize["characters_out"] == (
        normalize["characters_removed"] - normalize.get("characters_added", 0)  # 0: not listed
    )
    minhash = stages[3]
    removed = minhash["removed"]["near_duplicate"]
    assert removed > 0 and minhash["sums"]["clusters"] > 0
    clusters = minhash["histograms"]["cluster_size"]
    assert clusters["n"] == minhash["sums"]["clusters"]
    assert clusters["total"] == minhash["sums"]["clusters"] + removed  # kept one + removed
    similarity = minhash["histograms"]["similarity"]
    assert similarity["n"] == removed and similarity["marks"] == {"threshold": 0.7}
    assert "statistics" not in one.manifest["stages"][3]["details"]  # in the file only
    tokenize = stages[-1]
    assert tokenize["sums"]["tokens_out"] == one.manifest["tokens"]
    assert tokenize["histograms"]["tokens_out"]["n"] == tokenize["documents_out"]
    assert "characters_out" not in tokenize["sums"]  # the text went with tokenize

    sources = data["sources"]
    assert [s["input"] for s in sources] == [i["name"] for i in one.manifest["inputs"]]
    assert sum(s["written"] for s in sources) == one.manifest["counts"]["written"]
    assert sum(s["tokens"] for s in sources) == one.manifest["tokens"]
    assert [s["documents"] for s in sources] == [i["documents"] for i in one.manifest["inputs"]]


def test_verify_checks_the_statistics_file(tmp_path: Path) -> None:
    project(tmp_path)
    version = build(tmp_path, "out")
    assert verify(version.path) == []
    path = version.path / document.NAME
    writable(version.path)
    flip_byte(path)
    sealed(version.path)
    assert verify(version.path) == [
        f"{document.NAME}: sha256 differs from the manifest (content changed)"
    ]
    writable(version.path)
    path.unlink()
    sealed(version.path)
    problems = verify(version.path)
    assert len(problems) == 1 and problems[0].startswith(document.NAME)


def test_statistics_off_writes_no_file(tmp_path: Path) -> None:
    project(tmp_path)
    on, off = build(tmp_path, "on"), build(tmp_path, "off", stats=False)
    assert off.manifest["statistics"] is None
    assert not (off.path / document.NAME).exists()
    assert document.read(off.path) is None
    assert verify(off.path) == []
    assert on.fingerprint != off.fingerprint  # a version with statistics is another version
    assert [s["sha256"] for s in on.manifest["shards"]] == [
        s["sha256"] for s in off.manifest["shards"]
    ]

"""A barrier's basis taken by document id when an earlier decision changed (issue 18, point
1): a file inserted before the others changes every old partition's exact_dedup decision,
and MinHash still computes signatures only for the new file's documents, from its family
entry (`curate.cache.replay`), with the version a build from scratch would publish."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from conftest import corpus, write_jsonl
from test_incremental import recipe, rejected
from test_stage_cache import assert_same_as_scratch, build, caching, manifest

from curate.cache import keys as cache_keys
from curate.stage_params import StageParams
from curate.stages.base import MapStage, StageResult
from curate.stages.exact_dedup import ExactDedup, ExactDedupParams
from curate.stages.filter_length import FilterLength, FilterLengthParams
from curate.stages.minhash_dedup import MinHashDedup, MinHashDedupParams
from curate.stages.normalize import Normalize, NormalizeParams
from curate.summary import render_summary
from curate.version import Version

MINHASH = 2  # its position in test_incremental's recipe


def old_files(folder: Path) -> list[dict[str, Any]]:
    docs = corpus(240, dup_every=7)
    write_jsonl(folder / "data" / "b.jsonl", docs[:120])
    write_jsonl(folder / "data" / "c.jsonl", docs[120:])
    return docs


def inserted(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of every 9th old document (one or more in every old partition), first in
    input order now: each old partition's copy is the one exact_dedup drops."""
    texts = list(dict.fromkeys(d["text"] for d in docs[::9]))
    return [{"id": f"new{i}", "text": t} for i, t in enumerate(texts)]


def minhash_record(version: Path) -> dict[str, Any]:
    found = caching(version)[MINHASH]
    assert found is not None
    return found


def parts_of(version: Path, name: str) -> int:
    return sum(1 for p in manifest(version)["partitions"] if p["input"] == name)


def docs_into(version: Path, position: int) -> int:
    return int(manifest(version)["stages"][position]["docs_in"])


def test_an_inserted_file_computes_only_its_own_documents_signatures(tmp_path: Path) -> None:
    docs = old_files(tmp_path)
    first = build(tmp_path, recipe())
    assert minhash_record(first)["docs_computed"] == docs_into(first, MINHASH)
    new = inserted(docs)
    write_jsonl(tmp_path / "data" / "a.jsonl", new)
    second = build(tmp_path, recipe())
    dropped = {r["id"] for r in rejected(second) if r["stage"] == "exact_dedup"}
    for d in docs[::9]:  # every old copy of an inserted text goes now: every old partition's
        assert d["id"] in dropped  # exact_dedup decision changed
    parts = len(manifest(second)["partitions"])
    record = minhash_record(second)
    assert record["docs_computed"] == len(new)  # the inserted file's documents, no old one's
    assert record["docs_computed"] + record["docs_reused"] == docs_into(second, MINHASH)
    new_parts = parts_of(second, "data/a.jsonl")
    assert (record["ran"], record["reused"]) == (new_parts, parts - new_parts)
    reused = record["docs_reused"]
    shown = " ".join(render_summary(Version(second)).split())  # the summary says so too
    assert f"{reused:,}/{reused + len(new):,} documents" in shown
    assert len(basis_entries(tmp_path)) == parts  # the old rows are not kept a second time
    assert_same_as_scratch(tmp_path, recipe(), second)


def near_copy(docs: list[dict[str, Any]]) -> tuple[int, str]:
    """A document of c.jsonl and a new text for it of the same length (so its partition's
    key, made of the file's name and byte range, stays), a near-duplicate of a b.jsonl one:
    that document's text with the last digit changed (12 of 13 word 5-grams shared)."""
    texts = [d["text"] for d in docs]
    for x in range(125, 240):
        if texts.count(texts[x]) > 1:
            continue
        for i in range(120):
            words = texts[i].split()
            if len(texts[i]) == len(texts[x]) and texts.count(texts[i]) == 1 and len(words) >= 12:
                last = words[-1]
                changed = last[:-1] + str((int(last[-1]) + 1) % 10)
                return x, " ".join([*words[:-1], changed])
    raise AssertionError("no such pair in the corpus")


def test_a_changed_document_keeps_its_id_and_gets_a_fresh_signature(tmp_path: Path) -> None:
    docs = old_files(tmp_path)
    first = build(tmp_path, recipe())
    x, text = near_copy(docs)
    changed = [dict(d) for d in docs[120:]]
    changed[x - 120]["text"] = text  # the same id, another text: MinHash must see the new one
    write_jsonl(tmp_path / "data" / "c.jsonl", changed)
    write_jsonl(tmp_path / "data" / "a.jsonl", inserted(docs))  # every decision changes
    second = build(tmp_path, recipe())
    keys = {p["key"] for p in manifest(first)["partitions"]}
    assert keys <= {p["key"] for p in manifest(second)["partitions"]}  # the same partitions
    removed = {r["id"]: r["stage"] for r in rejected(second)}
    assert docs[x]["id"] not in {r["id"] for r in rejected(first)}
    assert removed.get(docs[x]["id"]) == "minhash_dedup"
    assert_same_as_scratch(tmp_path, recipe(), second)


def basis_entries(folder: Path) -> list[Path]:
    """The cache's MinHash basis entries that have a family (pass 1's)."""
    found = []
    for meta in (folder / "out" / "t" / ".cache" / "stages").glob("*/*/meta.json"):
        data = json.loads(meta.read_text())["meta"]
        if data.get("kind") == "basis" and data.get("family"):
            found.append(meta.parent)
    return found


def test_a_damaged_family_entry_is_recomputed_not_trusted(tmp_path: Path) -> None:
    docs = old_files(tmp_path)
    first = build(tmp_path, recipe())
    entries = basis_entries(tmp_path)
    assert len(entries) == len(manifest(first)["partitions"])
    for entry in entries:  # one signature value changed in every entry: sizes stay
        path = entry / "basis.arrow"
        path.chmod(0o640)
        data = bytearray(path.read_bytes())
        table = pa.ipc.open_file(pa.py_buffer(bytes(data))).read_all()
        assert table.num_rows
        data[len(data) // 2] ^= 0x5A
        path.write_bytes(bytes(data))
    write_jsonl(tmp_path / "data" / "a.jsonl", inserted(docs))
    second = build(tmp_path, recipe())
    record = minhash_record(second)
    assert record["docs_reused"] == 0  # every family entry failed its check
    assert record["docs_computed"] == docs_into(second, MINHASH)
    assert_same_as_scratch(tmp_path, recipe(), second)
    # the families now lead to what this run kept: another inserted file reuses them
    write_jsonl(tmp_path / "data" / "0.jsonl", [{"id": "zero", "text": docs[1]["text"]}])
    third = build(tmp_path, recipe())
    assert minhash_record(third)["docs_computed"] == 1
    assert_same_as_scratch(tmp_path, recipe(), third)


class Neighbourly(MapStage):
    """A user's stage: curate cannot know whether a document's output depends on others."""

    name = "neighbourly"
    Params = StageParams

    def process(self, batch: pa.RecordBatch) -> StageResult:
        return StageResult(batch)


@pytest.mark.parametrize("between", [False, True])
def test_a_user_stage_after_a_decision_leaves_the_basis_without_family(between: bool) -> None:
    normalize, length = Normalize(NormalizeParams()), FilterLength(FilterLengthParams())
    exact, minhash = ExactDedup(ExactDedupParams()), MinHashDedup(MinHashDedupParams())
    user: list[MapStage] = [Neighbourly(StageParams())] if between else []
    passes = [([normalize, *user], exact), (user, minhash), ([length], None)]
    prefixes = cache_keys.family_prefixes(passes)  # type: ignore[arg-type]
    assert prefixes[0] is None and prefixes[2] is None  # no decision before; no barrier after
    assert (prefixes[1] is None) == between  # a user's stage before the first decision is fine


def test_a_removed_file_computes_only_the_documents_it_had_kept_out(tmp_path: Path) -> None:
    docs = old_files(tmp_path)
    new = inserted(docs)
    write_jsonl(tmp_path / "data" / "a.jsonl", new)
    build(tmp_path, recipe())
    (tmp_path / "data" / "a.jsonl").unlink()  # the old copies are kept again: computed,
    second = build(tmp_path, recipe())  # each in its place among the documents reused
    record = minhash_record(second)
    assert record["docs_computed"] == len(new)
    assert record["docs_computed"] + record["docs_reused"] == docs_into(second, MINHASH)
    assert_same_as_scratch(tmp_path, recipe(), second)

"""The partition-digest cache: digests of a file read before, used only while its stat
identity and partition size are those they were taken with; garbage in the file is ignored."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import corpus, write_jsonl, write_recipe

import curate
from curate.io.digest_cache import DigestCache, FileDigests, file_digests, whole_hash
from curate.io.inputs import InputFile, discover_inputs

TARGET = 4000


def inputs(folder: Path, *patterns: str) -> list[InputFile]:
    return discover_inputs(list(patterns), folder)


def one(folder: Path, pattern: str) -> InputFile:
    [found] = inputs(folder, pattern)
    return found


def make_inputs(folder: Path) -> list[str]:
    """A plain JSONL file of several partitions, a compressed one, a Parquet file of several
    row groups and a text folder of several members: every unit but Arrow batches."""
    data = folder / "data"
    write_jsonl(data / "a.jsonl", corpus(200, prefix="a"))
    plain = write_jsonl(folder / "b.jsonl", corpus(100, prefix="b"))
    (data / "b.jsonl.gz").write_bytes(gzip.compress(plain.read_bytes()))
    plain.unlink()
    pq.write_table(pa.Table.from_pylist(corpus(200, prefix="c")), data / "c.parquet",
                   row_group_size=40)  # fmt: skip
    (folder / "notes").mkdir()
    for i in range(12):
        (folder / "notes" / f"n{i:02}.txt").write_text(f"note {i} " + "words " * (i * 60))
    return ["data/*.jsonl", "data/*.jsonl.gz", "data/*.parquet", "notes"]


def test_fresh_digests_are_those_the_build_took(tmp_path: Path) -> None:
    """`file_digests` plans and hashes a file as a build's pass 0 does: the same keys and
    digests as the manifest's partitions, and for Parquet the manifest's content hash."""
    patterns = make_inputs(tmp_path)
    recipe = write_recipe(tmp_path, inputs=patterns, id_field=None, partition_size="4KB")
    version = curate.run(recipe)
    manifest = version.manifest
    hashes = {i["name"]: i["content_hash"] for i in manifest["inputs"]}
    files = inputs(tmp_path, *patterns)
    assert [f.format for f in files] == ["jsonl", "jsonl.gz", "parquet", "text_folder"]
    for inp in files:
        found = file_digests(inp, TARGET)
        want = {p["key"]: p["digest"] for p in manifest["partitions"] if p["input"] == inp.name}
        assert found.parts == want, inp.name
        assert (found.whole is not None) == (inp.format == "parquet")
        if found.whole is not None:
            assert found.whole == hashes[inp.name] == whole_hash(inp.path)
    assert sum(len(file_digests(f, TARGET).parts) > 1 for f in files) == 3  # all but .gz


def test_kept_digests_are_used_for_the_same_identity_and_size_only(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "data" / "a.jsonl", corpus(200))
    inp = one(tmp_path, "data/a.jsonl")
    found = file_digests(inp, TARGET)
    cache = DigestCache(None)
    cache.keep(inp, TARGET, found)
    again = DigestCache(cache.text())
    assert again.get(inp, TARGET) == found and again.digests(inp, TARGET) == found.parts
    assert again.get(inp, TARGET * 2) is None  # planned for another partition size
    assert again.text() is None  # nothing new: nothing to write

    os.utime(data, ns=(data.stat().st_atime_ns, data.stat().st_mtime_ns + 10**9))
    assert again.get(one(tmp_path, "data/a.jsonl"), TARGET) is None  # touched: hash it again
    os.chmod(data, 0o600)  # ctime moves, size and mtime do not
    assert again.get(one(tmp_path, "data/a.jsonl"), TARGET) is None
    copy = tmp_path / "copy"
    shutil.copy2(data, copy)  # same bytes, size and mtime: another inode
    os.replace(copy, data)
    assert again.get(one(tmp_path, "data/a.jsonl"), TARGET) is None


@pytest.mark.parametrize(
    "text",
    ["not json", "[]", "7", '{"x": 1}', "{" * 100_000, json.dumps({"/a": [1]})],
)
def test_garbage_is_ignored(tmp_path: Path, text: str) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(20))
    inp = one(tmp_path, "data/a.jsonl")
    cache = DigestCache(text)
    assert cache.get(inp, TARGET) is None
    cache.keep(inp, TARGET, file_digests(inp, TARGET))
    assert cache.get(inp, TARGET) is not None and cache.text() is not None


def test_a_damaged_entry_is_ignored(tmp_path: Path) -> None:
    """An entry for this very identity whose digests are not digests, or a Parquet file's
    without its whole-file hash, is not used."""
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(20))
    pq.write_table(pa.Table.from_pylist(corpus(20)), tmp_path / "data" / "c.parquet")
    for inp in inputs(tmp_path, "data/a.jsonl", "data/c.parquet"):
        good = file_digests(inp, TARGET)
        cache = DigestCache(None)
        cache.keep(inp, TARGET, good)
        entry = json.loads(cache.text() or "")[inp.path]
        key = next(iter(good.parts))
        bad = [
            {**entry, "parts": {}},
            {**entry, "parts": {key: "sha256:00"}},
            {**entry, "parts": {key: 7}},
            {**entry, "parts": [key]},
            {**entry, "whole": "xxh3_128:zz"},
            {**entry, "whole": None if good.whole else good.parts[key]},
            {**entry, "size": entry["size"] + 1},
        ]
        for damaged in bad:
            assert DigestCache(json.dumps({inp.path: damaged})).get(inp, TARGET) is None, damaged
        assert DigestCache(json.dumps({inp.path: entry})).get(inp, TARGET) == good


def test_a_renamed_parquet_column_changes_the_whole_file_hash(tmp_path: Path) -> None:
    """A renamed column changes every partition's digest (they cover the schema) and the
    whole file's hash, which Parquet and Arrow entries carry besides."""
    table = pa.Table.from_pylist(corpus(50))
    pq.write_table(table, tmp_path / "a.parquet")
    pq.write_table(table.rename_columns(["id", "body"]), tmp_path / "b.parquet")
    a, b = (file_digests(one(tmp_path, f"{n}.parquet"), TARGET) for n in "ab")
    assert list(a.parts.values()) != list(b.parts.values())
    assert a.whole != b.whole


def test_forgetting_files_no_more_inputs(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(20))
    write_jsonl(tmp_path / "data" / "b.jsonl", corpus(20, prefix="b"))
    a, b = inputs(tmp_path, "data/*.jsonl")
    cache = DigestCache(None)
    for inp in (a, b):
        cache.keep(inp, TARGET, file_digests(inp, TARGET))
    later = DigestCache(cache.text())
    later.forget_others({a.path})
    kept = json.loads(later.text() or "")
    assert list(kept) == [a.path] and later.get(a, TARGET) is not None
    assert later.get(b, TARGET) is None


def test_digests_dataclass_round_trips_through_json(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(20))
    inp = one(tmp_path, "data/a.jsonl")
    found = FileDigests({"0123456789abcdef": "xxh3_128:" + "0" * 32})
    cache = DigestCache(None)
    cache.keep(inp, TARGET, found)
    assert DigestCache(cache.text()).get(inp, TARGET) == found

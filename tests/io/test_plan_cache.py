"""The plan cache (`curate.io.plan_cache`): a file planned before is planned again without
reading it, and a cache entry that is not for this file, or not boundaries, is ignored."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import write_recipe

import curate
from curate.io.inputs import discover_inputs
from curate.io.partitions import plan_partitions
from curate.io.plan_cache import PlanCache


def bytes_read() -> int:
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


def sparse_jsonl(path: Path, size: int, every: int = 64 << 10) -> None:
    """A file of `size` bytes, mostly a hole, with a short line ending every `every` bytes."""
    line = b'{"text": "a line"}\n'
    with open(path, "wb") as f:
        f.truncate(size)
        for end in range(every, size + 1, every):
            os.pwrite(f.fileno(), line, end - len(line))


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs Linux's /proc/self/io")
def test_a_file_planned_before_is_planned_without_reading_it(tmp_path: Path) -> None:
    sparse_jsonl(tmp_path / "a.jsonl", 64 << 20)
    found = discover_inputs(["a.jsonl"], tmp_path)
    first = PlanCache(None)
    planned = plan_partitions(found, 1 << 20, first)
    text = first.text()
    assert len(planned) == 64 and text is not None
    before = bytes_read()
    again = PlanCache(text)
    assert plan_partitions(found, 1 << 20, again) == planned
    assert bytes_read() - before < 1024  # nothing of the file
    assert again.text() is None  # nothing changed: nothing to write
    assert plan_partitions(found, 2 << 20, PlanCache(text)) == plan_partitions(found, 2 << 20)


def corrupted(entry: dict, size: int) -> list[object]:
    """Cache contents that must be ignored, each for its own reason."""
    bounds = entry["value"]["bounds"]
    out: list[object] = ["not json", "[1, 2]", "[" * 100_000, {entry["path"]: [1]}]
    for key in ("target", "size", "mtime_ns", "ctime_ns", "inode", "device"):
        out.append({entry["path"]: {**entry["value"], key: entry["value"][key] + 1}})
    for bad in (
        "0,1,2",
        [str(b) for b in bounds],
        [0, True, size],
        [1, *bounds[1:]],
        [*bounds[:-1], size + 1],
        [*bounds[:-1], size - 1],
        [0, bounds[2], bounds[1], size],
        [0, bounds[1], bounds[1], size],
        [*range(0, size, 1000), size],  # more partitions than the target size allows
        [0, 1.5, size],
        [0, size],  # not split: nothing to keep
    ):
        out.append({entry["path"]: {**entry["value"], "bounds": bad}})
    return out


def test_a_bad_or_stale_entry_is_ignored(tmp_path: Path) -> None:
    lines = [json.dumps({"text": f"line {i} " + "w" * (i % 300)}) for i in range(3000)]
    (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n")
    found = discover_inputs(["a.jsonl"], tmp_path)
    fresh = plan_partitions(found, 50_000)
    cache = PlanCache(None)
    plan_partitions(found, 50_000, cache)
    [(path, value)] = json.loads(cache.text() or "").items()
    entry = {"path": path, "value": value}
    for bad in corrupted(entry, found[0].size):
        text = bad if isinstance(bad, str) else json.dumps(bad)
        assert plan_partitions(found, 50_000, PlanCache(text)) == fresh, text[:200]


def test_a_build_plans_from_the_cache_and_survives_a_bad_one(tmp_path: Path) -> None:
    lines = [json.dumps({"text": f"document {i} " + "word " * 15}) for i in range(3000)]
    data = ("\n".join(lines) + "\n").encode()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.jsonl").write_bytes(data)

    def partitions(stages: list[dict]) -> int:  # each a new recipe, so each run builds
        recipe = write_recipe(tmp_path, id_field=None, stages=stages, partition_size="50KB")
        return curate.run(recipe).manifest["inputs"][0]["partitions"]

    planned = partitions([])
    cache = tmp_path / "out" / "t" / ".cache" / "plans.json"
    entries = json.loads(cache.read_text())
    [entry] = entries.values()
    assert planned > 3 and len(entry["bounds"]) == planned + 1
    entry["bounds"] = [0, data.index(b"\n", len(data) // 2) + 1, len(data)]  # a plan of two
    planted = json.dumps(entries)
    cache.write_text(planted)
    assert partitions([{"normalize": {}}]) == 2  # taken from the cache
    cache.write_text("{")
    assert partitions([{"normalize": {"form": "NFKC"}}]) == planned
    assert [len(e["bounds"]) for e in json.loads(cache.read_text()).values()] == [planned + 1]
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(planted)
    cache.unlink()
    cache.symlink_to(elsewhere)
    assert partitions([{"exact_dedup": {}}]) == planned  # a link there is not followed
    assert elsewhere.read_text() == planted and not cache.is_symlink()

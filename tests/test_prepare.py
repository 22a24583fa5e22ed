"""prepare(): cheap when up to date, safe when many processes of one job call it at once."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path

from conftest import corpus, write_jsonl, write_recipe

import curate


def _prepare(recipe: str, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    v = curate.prepare(recipe)
    queue.put((str(v.path), v.up_to_date))


def test_concurrent_callers_get_one_build(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(3000))
    recipe = str(write_recipe(tmp_path))
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_prepare, args=(recipe, queue)) for _ in range(4)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    paths = {path for path, _ in results}
    assert len(paths) == 1  # everybody got the same version
    assert sum(1 for _, up_to_date in results if not up_to_date) == 1  # exactly one built it
    assert [p.name for p in (tmp_path / "out" / "t").iterdir() if p.name.startswith("v")] == ["v1"]


def test_up_to_date_prepare_reads_no_input(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(500))
    recipe = write_recipe(tmp_path)
    curate.prepare(recipe)
    opened = []
    real_open = open

    def spy(file, *args, **kwargs):  # type: ignore[no-untyped-def]
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", spy)
    started = time.perf_counter()
    v = curate.prepare(recipe)
    elapsed = time.perf_counter() - started
    assert v.up_to_date and elapsed < 0.5
    assert not [f for f in opened if f.endswith(".jsonl")]


def test_content_identity_ignores_touch_and_catches_edits(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "data" / "a.jsonl", corpus(50))
    recipe = write_recipe(tmp_path, input_identity="content")
    v1 = curate.prepare(recipe)
    os.utime(data, (time.time() + 100, time.time() + 100))  # touched, same bytes
    assert curate.prepare(recipe).path == v1.path
    with open(data, "a") as f:
        f.write(json.dumps({"id": "z", "text": "a brand new document"}) + "\n")
    v2 = curate.prepare(recipe)
    assert not v2.up_to_date and v2.name == "v2"
    cache = json.loads((tmp_path / "out" / "t" / ".cache" / "input-hashes.json").read_text())
    assert cache[str(data)]["hash"] == v2.manifest["inputs"][0]["content_hash"]

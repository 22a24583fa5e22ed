"""While worker processes run a build's passes, the idle driver imports what publishing
needs (`build._import_for_publishing`); a build that runs its partitions in the driver
does not (a thread there would only compete with the passes)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from conftest import corpus, write_jsonl, write_recipe

import curate
from curate import build
from curate.engines.local import LocalEngine


def test_only_started_workers_run_the_passes_elsewhere() -> None:
    one = LocalEngine(1)
    one.start()  # no pool: partitions run in this process
    assert not one.runs_elsewhere()
    two = LocalEngine(2)
    assert not two.runs_elsewhere()
    two.start()
    try:
        assert two.runs_elsewhere()
    finally:
        two.close()
    assert not two.runs_elsewhere()


@pytest.mark.parametrize("workers, expected", [(2, ["curate-prefetch"]), (1, [])])
def test_publishing_imports_come_beside_the_passes_only_with_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int, expected: list[str]
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(
        build, "_import_for_publishing", lambda: calls.append(threading.current_thread().name)
    )
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(40))
    recipe = write_recipe(tmp_path, stages=[{"normalize": {}}], engine={"workers": workers},
                          partition_size="1KB")  # fmt: skip
    version = curate.run(recipe)
    assert version.manifest["counts"]["written"] == 40
    assert calls == expected

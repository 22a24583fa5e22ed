"""A disk too small is refused up front; a disk that fills mid-run stops cleanly and resumes."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import corpus, write_jsonl, write_recipe

import curate
from curate.cli import main
from curate.output import shards


def test_refuses_to_start_when_the_disk_is_too_small(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe = write_recipe(project)
    usage = shutil.disk_usage(project)
    monkeypatch.setattr(shutil, "disk_usage", lambda _p: usage._replace(free=1000))
    result = CliRunner().invoke(main, ["run", str(recipe)])
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1 and "not enough space in" in line and "out/t" in line
    assert not list((project / "out" / "t").glob("v*"))


def test_disk_full_mid_run_stops_keeps_old_versions_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(2000))
    first = curate.run(
        write_recipe(tmp_path, output={"root": "out", "fsync": False, "shard_size": "16KB"})
    )
    recipe = write_recipe(
        tmp_path, stages=[{"normalize": {"form": "NFKC"}}, {"exact_dedup": {}}],
        output={"root": "out", "fsync": False, "shard_size": "16KB"},
    )  # fmt: skip
    real_write = shards._HashingFile.write
    budget = {"bytes": 60_000}

    def filling(self: Any, data: Any) -> int:
        budget["bytes"] -= len(data)
        if budget["bytes"] < 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(self, data)

    monkeypatch.setattr(shards._HashingFile, "write", filling)
    result = CliRunner().invoke(main, ["run", str(recipe)])
    assert result.exit_code == 2, result.stderr
    line = result.stderr.strip()
    assert (
        len(line.splitlines()) == 1
        and "disk full while writing" in line
        and "more is needed" in line
    )
    assert first.path.exists() and not (tmp_path / "out" / "t" / "v2").exists()
    assert list((tmp_path / "out" / "t").glob(".staging-*")), "staging kept for the resume"

    monkeypatch.setattr(shards._HashingFile, "write", real_write)  # space freed
    second = curate.run(recipe)
    assert second.name == "v2" and second.counts["written"] > 0
    from curate.verify import verify

    assert verify(second.path) == [] and verify(first.path) == []

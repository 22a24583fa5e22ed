"""`curate log` shows each dataset's stage cache size; `curate gc --cache` (and --dry-run)
frees it, only what the cache made, never while a run holds it, and no version with it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from click.testing import CliRunner, Result
from conftest import REPO, write_recipe

import curate
from curate.cache.settings import cache_root, cache_size
from curate.cache.store import CacheSpec, StageCache
from curate.cli import main
from curate.sizes import format_size


def cli(*args: object) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def dataset(project: Path, name: str = "t") -> Path:
    output = {"root": "out", "fsync": False, "cache": False}  # entries come from fill() only
    curate.run(write_recipe(project, name=name, output=output)).release()
    return project / "out" / name


def fill(folder: Path, n: int = 3) -> int:
    """n entries written through the store, as a run would; their bytes on disk."""
    cache = StageCache(CacheSpec(cache_root(folder), 10**9, fsync=False))
    for i in range(n):
        with cache.writer(f"{i:032x}") as w:
            w.path("rows.arrow").write_bytes(os.urandom(5000 + i))
            w.commit({"i": i})
    cache.close()
    size = cache_size(folder)
    assert size is not None and size > 15000
    return size


def versions(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("v"))


def test_log_shows_the_cache_size_per_dataset(project: Path) -> None:
    folder = dataset(project)
    assert ".cache/stages" not in cli("log", project / "out").stdout  # no cache yet
    size = fill(folder)
    result = cli("log", project / "out")
    assert result.exit_code == 0, result.stderr
    [line] = [x for x in result.stdout.splitlines() if ".cache/stages" in x]
    assert line.startswith("t/.cache/stages  ") and format_size(size) in line
    assert "curate gc --cache" in line
    assert "t/v1 (LATEST)" in result.stdout


def test_gc_cache_dry_run_then_frees_it(project: Path) -> None:
    folder = dataset(project)
    fill(folder)
    (cache_root(folder) / "notes.txt").write_text("not the cache's")
    entries = sum(1 for _ in cache_root(folder).glob("*/*/meta.json"))
    listed = cache_size(folder)
    dry = cli("gc", folder, "--cache", "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert "t/.cache/stages: would remove (" in dry.stdout and "would free" in dry.stdout
    assert sum(1 for _ in cache_root(folder).glob("*/*/meta.json")) == entries == 3
    assert cache_size(folder) == listed
    freed = cli("gc", folder, "--cache")
    assert freed.exit_code == 0, freed.stderr
    assert "t/.cache/stages: removed (" in freed.stdout and "freed 0 B" not in freed.stdout
    assert not list(cache_root(folder).glob("*/*/meta.json"))
    assert (cache_root(folder) / "notes.txt").read_text() == "not the cache's"
    assert versions(folder) == ["v1"]  # --cache alone removes no version
    assert curate.open(folder).to_arrow().num_rows > 0


def test_gc_needs_keep_or_cache(project: Path) -> None:
    folder = dataset(project)
    result = cli("gc", folder)
    assert result.exit_code == 2 and "--keep N" in result.stderr and "--cache" in result.stderr


def test_gc_keep_and_cache_together(project: Path) -> None:
    folder = dataset(project)
    output = {"root": "out", "fsync": False, "cache": False}
    curate.run(write_recipe(project, stages=[{"normalize": {}}], output=output)).release()
    fill(folder)
    result = cli("gc", folder, "--keep", "1", "--cache")
    assert result.exit_code == 0, result.stderr
    assert "t/v1: removed" in result.stdout and "t/.cache/stages: removed" in result.stdout
    assert versions(folder) == ["v2"]


def test_a_root_of_several_datasets_needs_all(project: Path) -> None:
    a, b = dataset(project, "a"), dataset(project, "b")
    fill(a)
    fill(b)
    refused = cli("gc", project / "out", "--cache")
    assert refused.exit_code == 2 and "--cache" in refused.stderr and "--all" in refused.stderr
    assert cache_size(a) == cache_size(b) > 0
    done = cli("gc", project / "out", "--cache", "--all")
    assert done.exit_code == 0, done.stderr
    assert "a/.cache/stages: removed" in done.stdout and "b/.cache/stages: removed" in done.stdout


_HOLDER = """
import sys, time
from pathlib import Path
from curate.cache.store import CacheSpec, StageCache
cache = StageCache(CacheSpec(Path(sys.argv[1]), 10**9, fsync=False))
with cache.using():
    Path(sys.argv[2]).write_text("holding")
    time.sleep(60)
"""


def test_gc_cache_keeps_a_cache_a_run_holds(project: Path) -> None:
    folder = dataset(project)
    size = fill(folder)
    ready = project / "ready"
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_HOLDER), str(cache_root(folder)), str(ready)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        result = cli("gc", folder, "--cache")
        assert result.exit_code == 0, result.stderr
        assert "t/.cache/stages: kept, a run is using it" in result.stdout
        assert cache_size(folder) == size
    finally:
        holder.kill()
        holder.wait(30)
    assert "t/.cache/stages: removed" in cli("gc", folder, "--cache").stdout


def test_gc_cache_never_follows_a_link(project: Path) -> None:
    folder = dataset(project)
    elsewhere = project / "elsewhere"
    fill(elsewhere)  # a cache-like tree somewhere else, reached only through the link
    before = cache_size(elsewhere)
    shutil.rmtree(folder / ".cache", ignore_errors=True)  # the build's digests.json, plans.json
    os.symlink(elsewhere / ".cache", folder / ".cache")
    result = cli("gc", folder, "--cache")
    assert result.exit_code == 1 and "t/.cache/stages: skipped, a symbolic link" in result.stdout
    assert cache_size(elsewhere) == before
    assert ".cache/stages" not in cli("log", folder).stdout  # not ours: not sized either

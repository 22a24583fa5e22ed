"""`curate forget --where` and `curate gc --purge-forgotten` (curate.forget.where, .purge):
what still holds a forgotten document is listed, then removed, refused while a reader holds
it; afterwards nothing under the root holds the text and the remaining version verifies."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO
from test_forget import NAME, corpus, ids_in, recipe_in

import curate
from curate.forget_command import Selection, forget
from curate.verify import verify


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "curate.cli", *args], env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip


def holding(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("purge")
    corpus(folder)
    recipe = recipe_in(folder)
    curate.run(recipe)
    forget(recipe, Selection(match=re.compile(NAME)), "request 18")
    return folder


@pytest.fixture
def folder(made: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(made, copy, symlinks=True)
    return copy


def test_where_lists_the_earlier_version_the_cache_and_the_inputs(folder: Path) -> None:
    out = cli("forget", str(folder / "out" / "t"), "--where")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any(line.startswith("version") and "/v1/" in line for line in lines)
    assert not any("/v2/" in line for line in lines)  # the version forget published
    assert any(line.startswith("cache") for line in lines)
    inputs = [line for line in lines if line.startswith("input")]
    assert len(inputs) == 2 and "Quimby" not in out.stdout


def test_purge_leaves_no_trace_under_the_root(folder: Path) -> None:
    store = folder / "out" / "t"
    assert holding(store, b"Quimby")  # v1 and the cache hold it before
    out = cli("gc", str(store), "--purge-forgotten")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "t/v1: rewritten without 3 forgotten document(s)" in out.stdout
    assert holding(store, b"Quimby") == []
    assert verify(store / "v1") == [] and verify(store / "v2") == []
    again = curate.run(folder / "recipe.yaml")
    assert again.up_to_date and again.name == "v2"
    where = cli("forget", str(store), "--where")
    assert [line for line in where.stdout.splitlines() if not line.startswith("input")] == []


def test_purge_refuses_while_a_reader_holds_an_affected_version(folder: Path) -> None:
    store = folder / "out" / "t"
    reader = curate.open(store / "v1")  # holds v1's read lock while open
    try:
        out = cli("gc", str(store), "--purge-forgotten")
        assert out.returncode == 1
        assert "v1" in out.stdout and "reader" in out.stdout
        assert (store / "v1").is_dir()
    finally:
        reader.release()
    assert cli("gc", str(store), "--purge-forgotten").returncode == 0
    assert verify(store / "v1") == [] and holding(store, b"Quimby") == []


def test_purge_refuses_when_latest_still_holds_them(made: Path, tmp_path: Path) -> None:
    corpus(tmp_path)
    recipe = recipe_in(tmp_path)
    first = ids_in(curate.run(recipe)).pop()
    from curate.forget.exclusions import Exclusions, text_hash
    from curate.store import Store

    store = Store(tmp_path / "out", "t")
    exclusions = Exclusions()
    exclusions.add({(text_hash("Note 1 reads"), None)}, "x")  # recorded, never run
    exclusions.resolved = {"a.jsonl": {"path": "", "size": 0, "mtime_ns": 0, "ids": [first]}}
    exclusions.save(store)
    out = cli("gc", str(store.path), "--purge-forgotten")
    assert out.returncode == 2 and "run curate forget first" in out.stderr


def test_an_export_of_an_affected_version_is_named_and_refused(folder: Path) -> None:
    store = folder / "out" / "t"
    exported = folder / "out" / "v1-jsonl"
    assert cli("export", str(store / "v1"), "--to", "jsonl", str(exported)).returncode == 0
    where = cli("forget", str(store), "--where").stdout
    assert f"export   {exported}" in where
    out = cli("gc", str(store), "--purge-forgotten")
    assert out.returncode == 1 and str(exported) in out.stdout
    shutil.rmtree(exported)
    assert cli("gc", str(store), "--purge-forgotten").returncode == 0


def test_a_version_a_live_mixture_draws_from_is_named_and_kept(tmp_path: Path) -> None:
    import yaml
    from conftest import corpus as docs_corpus
    from conftest import write_jsonl

    from curate.mix.prepare import prepare

    write_jsonl(tmp_path / "data" / "a.jsonl", docs_corpus(40, dup_every=0, prefix="m"))
    recipe = {
        "name": "docs",
        "inputs": ["data/*.jsonl"],
        "id_field": "id",
        "stages": [{"tokenize": {"source": str(REPO / "sample_data" / "tokenizer"),
                                 "pack": {"seq_len": 16}}}],
        "output": {"root": "out", "fsync": False},
        "engine": {"workers": 1},
    }  # fmt: skip
    (tmp_path / "docs.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    mixture = {"name": "mix", "budget": 320, "seed": 3, "output": {"root": "out", "fsync": False},
               "sources": [{"recipe": "docs.yaml", "weight": 1}]}  # fmt: skip
    (tmp_path / "mixture.yaml").write_text(yaml.safe_dump(mixture, sort_keys=False))
    mixed = prepare(tmp_path / "mixture.yaml")
    mixed.release()
    (tmp_path / "ids.txt").write_text("m3\n")
    out = cli("forget", str(tmp_path / "docs.yaml"), "--ids", str(tmp_path / "ids.txt"),
              "--reason", "x")  # fmt: skip
    assert out.returncode == 0, out.stderr
    store = tmp_path / "out" / "docs"
    where = cli("forget", str(store), "--where").stdout
    assert f"mixture  {mixed.path}" in where
    purged = cli("gc", str(store), "--purge-forgotten")
    assert purged.returncode == 1 and str(mixed.path) in purged.stdout
    assert (store / "v1").is_dir()


def test_wait_waits_for_the_reader(folder: Path) -> None:
    store = folder / "out" / "t"
    reader = curate.open(store / "v1")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    waiting = subprocess.Popen(
        [sys.executable, "-m", "curate.cli", "gc", str(store), "--purge-forgotten", "--wait"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        time.sleep(4)
        assert waiting.poll() is None and (store / "v1").is_dir()  # still waiting
    finally:
        reader.release()
    out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, out + err
    assert "t/v1: rewritten" in out and verify(store / "v1") == []


def test_where_names_what_lies_outside_the_root(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An export written elsewhere (the dataset folder notes where it went) and a
    `to_dataset` view in curate's cache are named, before the purge and after it rewrote
    the version they were made from (not one made after); they do not make the purge fail
    (its promise is the root)."""
    store = folder / "out" / "t"
    monkeypatch.setenv("CURATE_CACHE", str(tmp_path / "user-cache"))
    elsewhere = tmp_path / "elsewhere" / "v1-jsonl"
    elsewhere.parent.mkdir()
    assert cli("export", str(store / "v1"), "--to", "jsonl", str(elsewhere)).returncode == 0
    version = curate.open(store / "v1")
    view = version.view_folder()
    version.release()

    def outside(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.endswith("[outside the root]")]

    where = outside(cli("forget", str(store), "--where").stdout)
    assert any(line.startswith(f"export   {elsewhere}: draws from v1") for line in where)
    assert any(line.startswith(f"view     {view}: ") and " of v1," in line for line in where)
    out = cli("gc", str(store), "--purge-forgotten")
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{elsewhere}: kept, export of v1 outside the root" in out.stdout
    where = outside(cli("forget", str(store), "--where").stdout)
    assert len(where) == 2, where  # v1 now holds none, but they were made before
    assert all("v1 (as it was before the purge rewrote it)" in line for line in where)
    again = tmp_path / "elsewhere" / "v1-again"  # made from v1 as it is now: holds none
    assert cli("export", str(store / "v1"), "--to", "jsonl", str(again)).returncode == 0
    assert str(again) not in cli("forget", str(store), "--where").stdout

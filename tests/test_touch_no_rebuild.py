"""An input touched without changing rebuilds nothing (issue 17 point 4): the run re-hashes
only the inputs whose stat changed, finds the version built from the same bytes by its
content fingerprint, and files the new stat fingerprint as an alias of it."""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import REPO, corpus, writable, write_jsonl, write_recipe

import curate

STRACE = shutil.which("strace")


def make(folder: Path, kind: str, names: str = "ab") -> tuple[Path, list[Path]]:
    """A recipe over inputs of one kind, each of several partitions (but the compressed file,
    one), and the input files (a text folder's members)."""
    data = folder / "data"
    data.mkdir()
    if kind == "jsonl":
        files = [write_jsonl(data / f"{n}.jsonl", corpus(150, prefix=n)) for n in names]
        pattern = "data/*.jsonl"
    elif kind == "jsonl.gz":
        files = []
        for n in names:
            plain = write_jsonl(folder / f"{n}.jsonl", corpus(150, prefix=n))
            files.append(data / f"{n}.jsonl.gz")
            files[-1].write_bytes(gzip.compress(plain.read_bytes()))
            plain.unlink()
        pattern = "data/*.jsonl.gz"
    elif kind == "parquet":
        files = [data / f"{n}.parquet" for n in names]
        for n, path in zip(names, files, strict=True):
            table = pa.Table.from_pylist(corpus(150, prefix=n))
            pq.write_table(table, path, row_group_size=30, compression="none")
        pattern = "data/*.parquet"
    else:  # a text folder
        files = []
        for i in range(10):
            files.append(data / f"n{i:02}.txt")
            files[-1].write_text(f"note {i} says " + "words and more words " * (20 + i * 9))
        pattern = "data"
    recipe = write_recipe(folder, inputs=[pattern], id_field=None if kind == "text" else "id",
                          partition_size="3KB")  # fmt: skip
    return recipe, files


def touch(path: Path, seconds: int = 100) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + seconds * 10**9))


def rewrite(path: Path, *, keep_times: bool) -> None:
    """Another file with the same bytes renamed over the input: a copy (new mtime), or as
    `cp -p` would make it (same mtime; new inode and ctime)."""
    other = path.with_name(path.name + ".new")
    (shutil.copy2 if keep_times else shutil.copyfile)(path, other)
    if not keep_times:
        touch(other)
    os.replace(other, path)


def dataset(folder: Path) -> Path:
    return folder / "out" / "t"


def listing(folder: Path) -> list[str]:
    """The dataset folder's versions and staging folders."""
    return sorted(p.name for p in dataset(folder).iterdir() if re.match(r"v\d|\.staging", p.name))


class Refused:
    """Stands for `Build` where no build may start: nothing may be staged or run."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("a build started")


@pytest.mark.parametrize("kind", ["jsonl", "jsonl.gz", "parquet", "text"])
@pytest.mark.parametrize("how", ["touch", "copy", "cp -p"])
def test_touched_inputs_give_the_same_version(
    tmp_path: Path, kind: str, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe, files = make(tmp_path, kind)
    v1 = curate.run(recipe)
    assert len(v1.manifest["partitions"]) >= 2
    before = listing(tmp_path)
    for path in files:
        if how == "touch":
            touch(path)
        else:
            rewrite(path, keep_times=how == "cp -p")
    monkeypatch.setattr("curate.recipe_run.Build", Refused)
    again = curate.run(recipe)
    assert again.path == v1.path and again.up_to_date
    assert listing(tmp_path) == before == ["v1"]
    stat_fp = _stat_fingerprint(recipe)
    entry = (dataset(tmp_path) / ".index" / stat_fp).read_text()
    if how == "cp -p":  # size and mtime kept: the stat fingerprint is v1's own
        assert stat_fp == v1.fingerprint and entry == "v1\n"
    else:  # filed as an alias of the fingerprint v1 was built from
        assert stat_fp != v1.fingerprint and entry == f"same-as {v1.fingerprint}\n"
    assert curate.run(recipe).path == v1.path  # and found there next time


def _stat_fingerprint(recipe: Path) -> str:
    from curate.recipe import Recipe
    from curate.recipe_run import RecipeRun

    return RecipeRun(Recipe.load(recipe), lambda *a: None, None, "sizes").fingerprint


@pytest.mark.parametrize("kind", ["jsonl", "jsonl.gz", "parquet", "text"])
def test_a_touched_input_whose_content_changed_is_built(tmp_path: Path, kind: str) -> None:
    """One byte differs (the size is the same; of a compressed file, one byte of the text):
    the content fingerprint differs, v2 is built from the new bytes, and found next time."""
    recipe, files = make(tmp_path, kind)
    v1 = curate.run(recipe)
    target = files[-1]
    data = bytearray(target.read_bytes())
    if kind == "jsonl.gz":  # a new valid stream: one letter of the text
        plain = bytearray(gzip.decompress(bytes(data)))
        plain[plain.index(b"says") + 3] = ord("z")
        target.write_bytes(gzip.compress(bytes(plain), mtime=0))
    else:  # same size (Parquet: in the first data page, not the footer's statistics)
        data[data.index(b"says") + 3] = ord("z")
        target.write_bytes(bytes(data))
    touch(target)
    v2 = curate.run(recipe)
    assert v2.name == "v2" and not v2.up_to_date
    assert v2.manifest["partitions"] != v1.manifest["partitions"]
    assert curate.run(recipe).path == v2.path


def test_the_up_to_date_call_after_an_alias_reads_no_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe, files = make(tmp_path, "jsonl")
    v1 = curate.run(recipe)
    for path in files:
        touch(path)
    assert curate.run(recipe).path == v1.path
    opened: list[str] = []
    real_open = open

    def spy(file: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", spy)
    monkeypatch.setattr("curate.same_content.content_fingerprint", None)  # never computed
    assert curate.run(recipe).path == v1.path
    assert not [f for f in opened if f.endswith(".jsonl")]


SCRIPT = """
import sys, curate
v = curate.run(sys.argv[1])
print(v.name, v.up_to_date)
"""


def _traced(recipe: Path, log: Path) -> tuple[str, str]:
    """Run the recipe in a process under strace: (its output, the trace)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [STRACE, "-f", "-qq", "-e", "trace=open,openat,mkdir,mkdirat", "-o", str(log),
           sys.executable, "-c", SCRIPT, str(recipe)]  # fmt: skip
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip(), log.read_text()


def _opened(trace: str, files: list[Path]) -> set[str]:
    return {f.name for f in files if re.search(rf'"{re.escape(str(f))}"', trace)}


@pytest.mark.skipif(STRACE is None, reason="strace is not installed (apt-get install strace)")
@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_only_the_touched_inputs_are_read(tmp_path: Path, kind: str) -> None:
    """Seen by the kernel (strace), so a reader that opens files outside Python (Arrow's C++)
    counts too: of three inputs, the one touched is opened, the others are not, no staging
    folder is made; the next call opens no input at all."""
    recipe, files = make(tmp_path, kind, "abc")
    v1 = curate.run(recipe)
    touch(files[1])
    out, trace = _traced(recipe, tmp_path / "touched.trace")
    assert out == f"{v1.name} True"
    assert _opened(trace, files) == {files[1].name}
    assert ".staging-" not in trace
    out, trace = _traced(recipe, tmp_path / "again.trace")
    assert out == f"{v1.name} True" and _opened(trace, files) == set()


def test_an_alias_to_a_damaged_version_builds_it_again(tmp_path: Path) -> None:
    recipe, files = make(tmp_path, "jsonl")
    v1 = curate.run(recipe)
    for path in files:
        touch(path)
    assert curate.run(recipe).path == v1.path
    writable(v1.path)
    (v1.path / v1.manifest["shards"][0]["path"]).unlink()
    v2 = curate.run(recipe)
    assert v2.name == "v2" and v2.rebuilt_because is not None
    assert v2.rebuilt_because.startswith("v1 is damaged")
    assert curate.run(recipe).path == v2.path


def test_planted_aliases_are_not_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An alias names a fingerprint whose own entry names a version sealed with it: an alias
    naming no fingerprint, an alias of an alias, or an entry naming a version built from
    another fingerprint leads to a build, never to a version."""
    recipe, files = make(tmp_path, "jsonl")
    v1 = curate.run(recipe)
    index = dataset(tmp_path) / ".index"
    for path in files:  # new bytes: v2, whose content is not v1's
        path.write_text(path.read_text().replace("w1", "W1"))
    v2 = curate.run(recipe)
    assert v2.name == "v2"
    aliases = [p for p in index.iterdir() if p.read_text().startswith("same-as")]
    for alias in aliases:
        alias.unlink()  # v2 must not be found by content below
    for path in files:
        touch(path)
    fp = _stat_fingerprint(recipe)
    chained = index / ("e" * 64)
    chained.write_text(f"same-as {v1.fingerprint}\n")
    planted = [
        "same-as ../v1",
        f"same-as {'0' * 64}",
        f"same-as {chained.name}",  # an alias of an alias
        "v1",  # a version built from another fingerprint
    ]
    for text in planted:
        (index / fp).write_text(text + "\n")
        monkeypatch.setattr("curate.recipe_run.Build", Refused)
        with pytest.raises(AssertionError, match="a build started"):
            curate.run(recipe)
        monkeypatch.undo()
        assert listing(tmp_path) == ["v1", "v2"], text


CALLERS = """
import logging, multiprocessing, sys

def call(recipe, queue):
    import curate
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    v = curate.prepare(recipe)
    queue.put((v.name, v.up_to_date))

if __name__ == "__main__":
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=call, args=(sys.argv[1], queue)) for _ in range(4)]
    for p in procs:
        p.start()
    print(sorted(queue.get(timeout=300) for _ in procs))
    for p in procs:
        p.join()
"""


def test_concurrent_callers_hash_a_touched_input_once(tmp_path: Path) -> None:
    """The ranks of a job calling prepare() at once after a touch: one hashes (under the
    stat fingerprint's build lock), the others find the alias it filed."""
    recipe, files = make(tmp_path, "jsonl")
    big = files[0].with_name("big.jsonl")
    write_jsonl(big, corpus(20_000, prefix="big"))  # hashing takes a while: callers overlap
    v1 = curate.run(recipe)
    for path in [*files, big]:
        touch(path)
    script = tmp_path / "callers.py"
    script.write_text(textwrap.dedent(CALLERS))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, str(script), str(recipe)], env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str([(v1.name, True)] * 4)
    assert done.stderr.count("content fingerprint: 3 of 3 inputs hashed") == 1, done.stderr
    assert "content fingerprint:" not in done.stderr.replace(
        "content fingerprint: 3 of 3 inputs hashed", ""
    )


def test_digests_before_reading_come_from_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a stage cache's keys take before reading (`same_content.digests_now`): after a
    build, every partition's digest as the manifest has it, nothing hashed; after a touch,
    the touched file alone hashed again."""
    from curate import same_content
    from curate.io.digest_cache import file_digests
    from curate.io.inputs import discover_inputs
    from curate.store import Store

    recipe, files = make(tmp_path, "jsonl", "abc")
    v1 = curate.run(recipe)
    store = Store(tmp_path / "out", "t")
    target = 3000
    hashed: list[str] = []

    def counted(inp: Any, size: int) -> Any:
        hashed.append(Path(inp.path).name)
        return file_digests(inp, size)

    monkeypatch.setattr("curate.same_content.file_digests", counted)
    found = same_content.digests_now(store, discover_inputs(["data/*.jsonl"], tmp_path), target)
    assert found is not None and hashed == []
    assert {k: v for d in found for k, v in d.parts.items()} == {
        p["key"]: p["digest"] for p in v1.manifest["partitions"]
    }
    touch(files[2])
    again = same_content.digests_now(store, discover_inputs(["data/*.jsonl"], tmp_path), target)
    assert again == found and hashed == ["c.jsonl"]

"""Links swapped into a dataset folder are refused by the call that would follow them.

curate used to check that `.locks`, `.cache`, `.index`, a temporary file or the dataset
folder itself was not a symbolic link and then open it by name: a link planted between the
check and the open still redirected the write. Every name in a dataset folder now resolves
against a descriptor on that folder with O_NOFOLLOW (`curate.dirfd`). These tests plant
links where the old code followed them, and race a process that keeps swapping links in
while runs, readers and gc work: nothing may ever be written outside the dataset folder.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import write_recipe

import curate
from curate.cli import main


def tree(folder: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every entry under `folder` with its mode, mtime and (for files) bytes."""
    out = {}
    for p in sorted(folder.rglob("*")):
        st = p.lstat()
        out[str(p.relative_to(folder))] = (
            st.st_mode,
            st.st_mtime_ns,
            p.read_bytes() if p.is_file() and not p.is_symlink() else b"",
        )
    return out


def test_every_call_refuses_a_link_at_the_name_it_resolves(tmp_path: Path) -> None:
    from curate.dirfd import Folder

    inside, elsewhere = tmp_path / "dataset", tmp_path / "elsewhere"
    inside.mkdir()
    (elsewhere / "sub").mkdir(parents=True)
    (elsewhere / "theirs.txt").write_text("theirs\n")
    for name, target in [("file", "theirs.txt"), ("sub", "sub"), (".f.tmp-1", "theirs.txt")]:
        (inside / name).symlink_to(elsewhere / target)
    (inside / f".f.tmp-{os.getpid()}").symlink_to(elsewhere / "theirs.txt")
    before = tree(elsewhere)
    with Folder.open(inside) as folder:
        for call in (
            lambda: folder.open_file("file", os.O_RDWR),
            lambda: folder.open_file("file", os.O_RDWR, 0o600),
            lambda: folder.read_text("file"),
            lambda: folder.folder("sub"),
            lambda: folder.folder("sub", 0o700),
        ):
            with pytest.raises(OSError) as caught:
                call()
            assert caught.value.errno == errno.ELOOP and "symbolic link" in str(caught.value)
        folder.write_atomic("f", "ours\n", 0o640)  # its temporary name was a planted link
        with pytest.raises(OSError):
            folder.remove_tree("sub")  # a link is never entered
    assert (inside / "f").read_text() == "ours\n" and not (inside / "f").is_symlink()
    assert tree(elsewhere) == before
    link = tmp_path / "link"
    link.symlink_to(inside)
    with pytest.raises(OSError, match="symbolic link"):
        Folder.open(link)  # a link at the folder's own name


def test_publishing_never_writes_through_a_link_planted_at_a_temporary_name(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """`LATEST` and `.index` entries are written to `.<name>.tmp-<pid>` and renamed: the
    temporary file was opened with O_TRUNC and without O_NOFOLLOW, so a link planted at that
    predictable name made publishing overwrite the file it leads to."""
    first = curate.run(write_recipe(project))
    first.release()
    dataset = first.path.parent
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    theirs = elsewhere / "important.txt"
    theirs.write_text("theirs\n")
    recipe = write_recipe(project, stages=[])
    (dataset / f".LATEST.tmp-{os.getpid()}").symlink_to(theirs)
    version = curate.run(recipe)  # this process publishes v2
    assert version.name == "v2" and (dataset / "LATEST").read_text() == "v2\n"
    assert theirs.read_text() == "theirs\n"


def test_a_run_never_writes_into_a_dataset_folder_that_is_a_link(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Anyone who may write the output root can replace a dataset folder by a link: runs
    followed it and wrote their staging, locks and versions wherever it led."""
    first = curate.run(write_recipe(project))
    first.release()
    dataset = first.path.parent
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    shutil.move(dataset, project / "moved")
    dataset.symlink_to(elsewhere)
    with pytest.raises(curate.CurateError, match="symbolic link"):
        curate.run(write_recipe(project, stages=[]))
    assert list(elsewhere.iterdir()) == []


SWAPPER = """
import os, sys, time
dataset, elsewhere, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
names = [".locks", ".index", ".cache", "LATEST", ".publish.lock"]
deadline = time.monotonic() + seconds
swaps = 0
while time.monotonic() < deadline:
    for name in names:
        real, aside = os.path.join(dataset, name), os.path.join(dataset, name + ".aside")
        try:
            os.rename(real, aside)
        except OSError:
            aside = None
        try:
            os.symlink(os.path.join(elsewhere, name), real)
            swaps += 1
            os.unlink(real)
        except OSError:
            pass
        if aside is not None:
            try:
                os.rename(aside, real)
            except OSError:
                pass
print(swaps)
"""


def test_links_swapped_in_while_runs_readers_and_gc_work_are_never_followed(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A process keeps replacing `.locks`, `.index`, `.cache`, `LATEST` and the publish lock
    by links to another folder (and putting them back) while this one publishes versions,
    checks its hash cache, opens versions (each taking a read lock) and runs gc. Runs may fail
    on a link (that is the refusal); nothing may appear or change in the other folder."""
    recipe = write_recipe(project, input_identity="content")
    curate.run(recipe).release()
    dataset = project / "out" / "t"
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    for name in (".locks", ".index", ".cache"):
        (elsewhere / name).mkdir()
    for name in ("LATEST", ".publish.lock"):
        (elsewhere / name).write_text("theirs\n")
    before = tree(elsewhere)
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(dataset), str(elsewhere), "6"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    done, refused, i = 0, 0, 0
    deadline = time.monotonic() + 5
    try:
        while time.monotonic() < deadline:
            i += 1
            try:
                if i % 7 == 0:  # a new version: staging, index entry, LATEST, locks
                    stages = [{"normalize": {}}] * (1 + i % 3) + [{"exact_dedup": {}}]
                    curate.run(write_recipe(project, input_identity="content", stages=stages))
                    os.utime(project / "data" / "a.jsonl")  # the next run rewrites the cache
                elif i % 5 == 0:
                    CliRunner().invoke(main, ["gc", str(dataset), "--keep", "1"])
                else:
                    curate.open(dataset).release()  # LATEST, a read lock in .locks
                done += 1
            except (curate.CurateError, OSError):
                refused += 1
    finally:
        swapper.wait(timeout=60)
    swaps = int(swapper.stdout.read()) if swapper.stdout else 0
    print(f"\n{swaps} swaps, {done} operations done, {refused} refused")
    assert swaps > 100 and done > 10, (swaps, done, refused)
    assert tree(elsewhere) == before

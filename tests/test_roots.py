"""Output roots: curate writes datasets only into a root it made or one holding only datasets.

A recipe's `output.root` set to a home folder (or `/data`, or a project folder) must never
turn it into a dataset store where `curate gc` and later runs act: curate marks the roots
it creates (`.curate-root`), adopts an unmarked root only when every entry in it is a
curate dataset (roots made by older curate versions), and otherwise refuses the run,
naming the root and an entry that is not a dataset, before writing anything.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import write_recipe

import curate

MARK = ".curate-root"


def run(project: Path, root: Path | str, **overrides: object) -> curate.Version:
    output = {"root": str(root), "fsync": False}
    return curate.run(write_recipe(project, output=output, **overrides))


def test_a_root_curate_creates_is_marked(project: Path) -> None:
    version = run(project, "made/out")
    root = project / "made" / "out"
    assert version.path.parent.parent == root
    assert (root / MARK).is_file()


@pytest.mark.parametrize("identity", ["stat", "content"])
def test_a_home_folder_is_never_made_a_dataset_store(project: Path, identity: str) -> None:
    home = project / "home"
    (home / "Documents").mkdir(parents=True)
    (home / "Documents" / "taxes.txt").write_text("mine\n")
    (home / ".bashrc").write_text("alias ll='ls -l'\n")
    before = sorted(p.relative_to(home) for p in home.rglob("*"))
    with pytest.raises(curate.CurateError) as exc:
        run(project, home, input_identity=identity)
    message = str(exc.value)
    assert f"output.root: {home} is not a curate output root" in message
    assert "'.bashrc'" in message  # the first entry that is not a curate dataset
    assert sorted(p.relative_to(home) for p in home.rglob("*")) == before  # nothing written


def test_a_root_of_datasets_made_by_an_older_curate_is_adopted(project: Path) -> None:
    first = run(project, "out")
    root = project / "out"
    (root / MARK).unlink()  # as older versions left it: datasets only
    (root / "half").mkdir()  # a content-identity run that failed before building
    (root / "half" / ".cache").mkdir()
    (root / "half" / ".cache" / "input-hashes.json").write_text("{}")
    second = run(project, root, name="other")
    assert second.path.parent == root / "other" and first.path.is_dir()
    assert (root / MARK).is_file()


def test_an_empty_folder_is_adopted(project: Path) -> None:
    (project / "empty").mkdir()
    run(project, "empty")
    assert (project / "empty" / MARK).is_file()


def test_an_unmarked_root_with_anything_else_is_refused(project: Path) -> None:
    run(project, "out")
    root = project / "out"
    (root / MARK).unlink()
    (root / "notes.txt").write_text("x")
    with pytest.raises(curate.CurateError, match=r"'notes\.txt'"):
        run(project, root, name="other")
    assert not (root / "other").exists() and not (root / MARK).exists()
    (root / "notes.txt").unlink()
    (root / "checkpoints" / "step-100").mkdir(parents=True)
    with pytest.raises(curate.CurateError, match="'checkpoints'"):
        run(project, root, name="other")


def test_a_marked_root_stays_usable_whatever_else_it_holds(project: Path) -> None:
    run(project, "out")
    (project / "out" / "README.txt").write_text("datasets of team X\n")
    assert run(project, "out", name="other").path.parent == project / "out" / "other"
    shutil.rmtree(project / "out" / "other")

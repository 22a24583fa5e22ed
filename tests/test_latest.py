"""LATEST and .index entries are followed only to a sealed version of their own dataset.

Anyone who can write a dataset folder can replace its LATEST; curate.open() (and
`curate show`/`verify` on a dataset folder) must then fail by name rather than return a
folder planted elsewhere or beside the real versions, and `curate run` must not return
a version an `.index` entry points at unless it is the one built from that fingerprint.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import sealed, writable, write_recipe

import curate
from curate.cli import main


@pytest.fixture
def version(project: Path) -> curate.Version:
    return curate.run(write_recipe(project))


def plant(original: Path, where: Path, *, read_only: bool = True, **changes: str) -> Path:
    """A copy of a version at `where`, its manifest changed, read-only unless `read_only=False`."""
    shutil.copytree(original, where)
    writable(where)
    m = json.loads((where / "manifest.json").read_text())
    m.update(changes)
    (where / "manifest.json").write_text(json.dumps(m))
    if read_only:
        sealed(where)
    return where


def set_latest(dataset: Path, text: str) -> None:
    (dataset / "LATEST").chmod(0o640)
    (dataset / "LATEST").write_text(text + "\n")


def planted(kind: str, version: curate.Version, tmp_path: Path) -> str:
    """Make a planted folder of this kind; return what LATEST is set to."""
    dataset = version.path.parent
    if kind == "outside":
        plant(version.path, tmp_path / "evil" / "v9", version="v9")
        return os.path.relpath(tmp_path / "evil" / "v9", dataset)
    if kind == "absolute":
        return str(plant(version.path, tmp_path / "evil" / "v9", version="v9"))
    if kind == "no-manifest":
        (dataset / "v9" / "shards").mkdir(parents=True)
        (dataset / "v9" / "state.json").write_text("{}")
    elif kind == "writable":
        plant(version.path, dataset / "v9", read_only=False, version="v9")
    elif kind == "other-dataset":
        plant(version.path, dataset / "v9", dataset="other", version="v9")
    elif kind == "other-version":
        plant(version.path, dataset / "v9")  # its manifest says v1
    elif kind == "symlink":
        plant(version.path, tmp_path / "evil" / "v9", version="v9")
        (dataset / "v9").symlink_to(tmp_path / "evil" / "v9")
    return "v9"


KINDS = [
    "outside", "absolute", "no-manifest", "writable", "other-dataset", "other-version", "symlink"
]  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
def test_open_never_follows_latest_to_a_planted_folder(
    version: curate.Version, tmp_path: Path, kind: str
) -> None:
    dataset = version.path.parent
    set_latest(dataset, planted(kind, version, tmp_path))
    with pytest.raises(curate.CurateError) as exc:
        curate.open(dataset)
    message = str(exc.value)
    assert message.startswith(f"{dataset / 'LATEST'} names ")
    assert "not a published version of this dataset" in message
    assert curate.open(dataset, "v1").path == version.path  # naming a version still works


@pytest.mark.parametrize("command", ["show", "verify"])
def test_the_cli_does_not_follow_a_planted_latest(
    version: curate.Version, tmp_path: Path, command: str
) -> None:
    dataset = version.path.parent
    set_latest(dataset, planted("outside", version, tmp_path))
    result = CliRunner().invoke(main, [command, str(dataset)])
    assert result.exit_code != 0
    assert f"{dataset / 'LATEST'} names " in result.output + result.stderr
    assert "evil" not in result.stdout


def test_a_version_argument_cannot_leave_the_dataset(
    version: curate.Version, tmp_path: Path
) -> None:
    plant(version.path, tmp_path / "evil" / "v9", version="v9")
    with pytest.raises(curate.CurateError, match="leads outside"):
        curate.open(version.path.parent, "../../evil/v9")


@pytest.mark.parametrize("kind", ["outside", "writable", "other-version"])
def test_run_does_not_return_a_version_a_planted_index_entry_names(
    project: Path, version: curate.Version, tmp_path: Path, kind: str
) -> None:
    dataset = version.path.parent
    entry = dataset / ".index" / version.fingerprint
    target = planted(kind, version, tmp_path)
    entry.chmod(0o640)
    entry.write_text(target + "\n")
    again = curate.run(write_recipe(project))
    assert again.path.parent == dataset and again.path.name != "v9"
    assert again.manifest["fingerprint"] == version.fingerprint


@pytest.mark.parametrize("spelling", [".", "./", "v1/.."])
def test_a_dataset_folder_named_as_dot_follows_its_latest(
    version: curate.Version, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    """`curate.open('.')` or `curate show .` from inside a dataset folder: the folder's
    name is its real one, not the '' or '..' a spelling of it ends with."""
    monkeypatch.chdir(version.path.parent)
    assert curate.open(spelling).path.resolve() == version.path.resolve()
    result = CliRunner().invoke(main, ["show", spelling])
    assert result.exit_code == 0, result.output

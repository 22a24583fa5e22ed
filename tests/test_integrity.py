"""A damaged version is refused by name wherever it is read; a flipped byte is `verify`'s job.

The cheap check (`curate.integrity`) is one stat per file the manifest lists: a missing
file, a shorter one, a symlink or a path leaving the version fails `open()`, `to_arrow()`,
`to_polars()` and `to_dataset()` with the file's name, never a partial table or a raw
pyarrow error.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner
from conftest import flip_byte, sealed, writable, write_recipe

import curate
from curate.cli import main
from curate.errors import CurateError


@pytest.fixture
def version(project: Path) -> curate.Version:
    v = curate.run(write_recipe(project, output={"root": "out", "fsync": False, "shard_size": 600}))
    assert len(v.manifest["shards"]) > 1
    return v


def readers(path: Path) -> list[Callable[[], Any]]:
    """Every way to read the version, each on a fresh object (the check runs once per object)."""
    return [
        lambda: curate.open(path),
        lambda: curate.open(path.parent),
        lambda: curate.open(path.parent, path.name),
        lambda: curate.Version(path).to_arrow(),
        lambda: curate.Version(path).to_polars(),
        lambda: curate.Version(path).to_dataset(),
        lambda: curate.Version(path).rejected(),
    ]


def refused(path: Path, message: str) -> None:
    sealed(path)
    for read in readers(path):
        with pytest.raises(CurateError, match=message) as caught:
            read()
        assert "curate verify" in str(caught.value)


def test_missing_shard_is_named(version: curate.Version) -> None:
    writable(version.path)
    shard = version.manifest["shards"][1]["path"]
    (version.path / shard).unlink()
    refused(version.path, f"{shard}: missing")


def test_shorter_valid_shard_is_named_with_both_sizes(version: curate.Version) -> None:
    writable(version.path)
    record = version.manifest["shards"][0]
    path = version.path / record["path"]
    table = pa.ipc.open_stream(path.read_bytes()).read_all()
    with pa.ipc.new_stream(str(path), table.schema) as writer:  # a valid stream, fewer rows
        writer.write_table(table.slice(0, table.num_rows // 3))
    size = path.stat().st_size
    assert size < record["bytes"]
    refused(version.path, f"{record['path']}: size {size}, manifest says {record['bytes']}")


def test_symlinked_shard_is_refused(version: curate.Version, tmp_path: Path) -> None:
    writable(version.path)
    record = version.manifest["shards"][0]
    path = version.path / record["path"]
    elsewhere = tmp_path / "elsewhere.arrow"
    elsewhere.write_bytes(path.read_bytes())  # same bytes, same size: only the link is wrong
    path.unlink()
    path.symlink_to(elsewhere)
    refused(version.path, f"{record['path']}: a symlink")


def test_missing_side_output_and_layout_files_are_named(version: curate.Version) -> None:
    writable(version.path)
    rejected = version.manifest["rejected"][0]["path"]
    (version.path / rejected).unlink()
    refused(version.path, f"{rejected}: missing")
    writable(version.path)
    version.path.joinpath(rejected).write_bytes(b"")
    refused(version.path, f"{rejected}: size 0, manifest says")


def test_missing_datasets_layout_file_is_named(version: curate.Version) -> None:
    writable(version.path)
    (version.path / "train" / "state.json").unlink()
    refused(version.path, "train/state.json: missing")


def test_manifest_path_outside_the_version_is_refused(version: curate.Version) -> None:
    writable(version.path)
    manifest = json.loads((version.path / "manifest.json").read_text())
    record = manifest["shards"][0]
    outside = version.path.parent / "planted.arrow"
    outside.write_bytes((version.path / record["path"]).read_bytes())  # right size, wrong place
    record["path"] = "../planted.arrow"
    (version.path / "manifest.json").write_text(json.dumps(manifest))
    refused(version.path, r"manifest.json: shards\[0\].path '../planted.arrow' leads outside")


def test_flipped_byte_passes_the_cheap_check_and_fails_verify(version: curate.Version) -> None:
    writable(version.path)
    flip_byte(version.shard_paths[0])
    sealed(version.path)
    assert curate.open(version.path.parent).path == version.path  # one stat per file: same size
    result = CliRunner().invoke(main, ["verify", str(version.path.parent)])
    assert result.exit_code == 1 and "sha256 differs" in result.output


def test_verify_of_a_dataset_folder_lists_every_damaged_file(version: curate.Version) -> None:
    writable(version.path)
    shards = [s["path"] for s in version.manifest["shards"][:2]]
    for shard in shards:
        (version.path / shard).unlink()
    sealed(version.path)
    result = CliRunner().invoke(main, ["verify", str(version.path.parent)])
    assert result.exit_code == 1
    assert all(f"{shard}: missing" in result.output for shard in shards)


def test_intact_version_is_checked_once_per_object(version: curate.Version) -> None:
    v = curate.open(version.path)
    writable(version.path)
    (version.path / version.manifest["shards"][1]["path"]).unlink()
    sealed(version.path)
    assert v.check_files() is v  # checked when opened: no stat again for this object
    with pytest.raises(CurateError, match="missing"):
        curate.open(version.path)


def test_a_damaged_version_read_as_an_input_fails_the_build(
    version: curate.Version, tmp_path: Path
) -> None:
    """A build reading a version as its input checks it as a reader does: a shard replaced by
    a shorter valid one would otherwise become a smaller dataset with every count agreeing."""
    writable(version.path)
    record = version.manifest["shards"][0]
    path = version.path / record["path"]
    table = pa.ipc.open_stream(path.read_bytes()).read_all()
    with pa.ipc.new_stream(str(path), table.schema) as writer:
        writer.write_table(table.slice(0, table.num_rows // 3))
    sealed(version.path)
    downstream = tmp_path / "downstream"
    downstream.mkdir()
    recipe = write_recipe(
        downstream, name="d", inputs=[str(version.path)], output={"root": "out", "fsync": False}
    )
    with pytest.raises(CurateError, match=f"{record['path']}: size") as caught:
        curate.run(recipe)
    assert "curate verify" in str(caught.value)
    assert not (downstream / "out" / "d").exists() or not list(
        (downstream / "out" / "d").glob("v*")
    )

"""curate verify: a flipped byte, a missing or an extra file is reported by name, non-zero exit."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import flip_byte, writable, write_recipe

import curate
from curate.cli import main


@pytest.fixture
def version(project: Path) -> curate.Version:
    return curate.run(write_recipe(project))


def check(path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["verify", str(path)])
    return result.exit_code, result.stdout + result.stderr


def test_intact_version_verifies(version: curate.Version) -> None:
    code, out = check(version.path)
    assert code == 0 and out.strip().endswith("OK")
    assert check(version.path.parent)[0] == 0  # the dataset folder: its LATEST


def test_flipped_byte_is_named(version: curate.Version) -> None:
    writable(version.path)
    shard = version.shard_paths[0]
    flip_byte(shard)
    code, out = check(version.path)
    assert code == 1 and f"{shard.relative_to(version.path).as_posix()}: sha256 differs" in out


def test_missing_and_extra_files_are_named(version: curate.Version) -> None:
    writable(version.path)
    rejected = version.path / version.manifest["rejected"][0]["path"]
    rejected.unlink()
    (version.path / "shards" / "cache-1234.arrow").write_bytes(b"x")
    code, out = check(version.path)
    assert code == 1
    assert f"{rejected.relative_to(version.path).as_posix()}: missing" in out
    assert "shards/cache-1234.arrow: not part of the version (extra file)" in out


def test_counts_that_do_not_reconcile_are_reported(version: curate.Version) -> None:
    writable(version.path)
    path = version.path / "manifest.json"
    m = json.loads(path.read_text())
    m["counts"]["read"] += 1
    path.write_text(json.dumps(m))
    code, out = check(version.path)
    assert code == 1 and "counts do not reconcile" in out


def test_manifest_schema_violation_is_reported(version: curate.Version) -> None:
    writable(version.path)
    path = version.path / "manifest.json"
    m = json.loads(path.read_text())
    del m["fingerprint"]
    path.write_text(json.dumps(m))
    code, out = check(version.path)
    assert code == 1 and "does not match the manifest schema" in out


def point_first_shard_at(version: curate.Version, path: str) -> None:
    """The manifest's first shard record made to name `path` (size and hash still right)."""
    writable(version.path)
    manifest = version.path / "manifest.json"
    m = json.loads(manifest.read_text())
    m["shards"][0]["path"] = path
    manifest.write_text(json.dumps(m))


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink"])
def test_a_shard_path_leaving_the_version_fails(
    version: curate.Version, tmp_path: Path, how: str
) -> None:
    # A copy of the shard outside the version, with the same bytes: following the manifest
    # there would find the right size and hash, and call a version OK that reads elsewhere.
    shard = version.shard_paths[0]
    rel = shard.relative_to(version.path).as_posix()
    outside = tmp_path / "elsewhere.arrow"
    outside.write_bytes(shard.read_bytes())
    writable(version.path)
    shard.unlink()
    if how == "dotdot":
        named = os.path.relpath(outside, version.path)
        point_first_shard_at(version, named)
    elif how == "absolute":
        named = str(outside)
        point_first_shard_at(version, named)
    else:
        named = rel
        shard.symlink_to(outside)
    code, out = check(version.path)
    assert code == 1, out
    assert f"{named}: leads outside the version folder" in out

"""Versions share unchanged files through hard links (curate.shared_files).

A rerun after a new input file (the stage cache replays the old partitions) links the old
partitions' files to the earlier version's instead of keeping a copy; each version stays a
complete folder that verifies, opens with datasets, pyarrow and polars, and can be removed
on its own. A damaged earlier file or one of another mode is copied, not linked.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import datasets
import polars as pl
import pyarrow as pa
import pytest
from click.testing import CliRunner
from conftest import corpus, flip_byte, sealed, writable, write_jsonl, write_recipe

import curate
from curate.cli import main
from curate.gc import collect
from curate.history import log_rows
from curate.output.shards import read_stream, write_table
from curate.sizes import format_size
from curate.store import remove_tree


def new_docs() -> list[dict[str, Any]]:
    return [{"id": f"n{i}", "text": f"Fresh text {i} about " + f"topic{i} " * 8} for i in range(40)]


def make_recipe(folder: Path, **output: Any) -> Path:
    return write_recipe(
        folder,
        partition_size="4KB",
        batch_size="2KB",
        output={"root": "out", "fsync": False, "shard_size": "2KB", **output},
    )


def first_version(folder: Path, **output: Any) -> Path:
    docs = corpus(240, dup_every=6)
    write_jsonl(folder / "data" / "a.jsonl", docs[:120])
    write_jsonl(folder / "data" / "b.jsonl", docs[120:])
    version = curate.run(make_recipe(folder, **output))
    version.release()
    return version.path


def second_version(folder: Path, **output: Any) -> Path:
    write_jsonl(folder / "data" / "c.jsonl", new_docs())  # sorts after the old files
    version = curate.run(make_recipe(folder, **output))
    version.release()
    return version.path


def listed(version: Path) -> dict[str, dict[str, Any]]:
    m = json.loads((version / "manifest.json").read_text())
    return {f["path"]: f for kind in ("shards", "rejected", "quarantine") for f in m[kind]}


def same_file(a: Path, b: Path) -> bool:
    if not a.exists():
        return False
    sa, sb = a.stat(), b.stat()
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def verify(path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["verify", str(path)])
    return result.exit_code, result.stdout + result.stderr


def check_opens(version: Path) -> int:
    ds = datasets.load_from_disk(str(version))["train"]  # a version without splits: its one
    table = curate.open(version).to_arrow()
    frame = pl.concat([pl.read_ipc_stream(p) for p in sorted((version / "shards").iterdir())])
    assert ds.num_rows == table.num_rows == frame.height
    assert sorted(ds["id"]) == sorted(table.column("id").to_pylist()) == sorted(frame["id"])
    return table.num_rows


@pytest.fixture
def two(tmp_path: Path) -> tuple[Path, Path]:
    return first_version(tmp_path), second_version(tmp_path)


def test_unchanged_partitions_are_linked_and_only_new_data_is_copied(
    two: tuple[Path, Path],
) -> None:
    v1, v2 = two
    old, new = listed(v1), listed(v2)
    linked = [p for p in new if same_file(v1 / p, v2 / p)]
    assert linked, "nothing shared"
    for path in new:
        shared = path in old and old[path]["sha256"] == new[path]["sha256"]
        assert same_file(v1 / path, v2 / path) == shared, path  # identical files, and only those
        assert (v2 / path).stat().st_nlink == (2 if shared else 1), path
    own = [p for p in new if p.startswith("shards/") and p not in linked]
    own_ids = set(pa.concat_tables([read_stream(v2 / p) for p in own])["id"].to_pylist())
    assert own_ids == {d["id"] for d in new_docs()}  # the version's own shards: the new data
    shared_ids = {
        i for p in linked if p.startswith("shards/") for i in read_stream(v2 / p)["id"].to_pylist()
    }
    assert not shared_ids & own_ids


def test_every_version_verifies_opens_and_is_removed_on_its_own(
    two: tuple[Path, Path], tmp_path: Path
) -> None:
    v1, v2 = two
    for version in (v1, v2):
        assert verify(version)[0] == 0
    assert check_opens(v2) == check_opens(v1) + len(new_docs())
    result = CliRunner().invoke(main, ["gc", str(tmp_path / "out" / "t"), "--keep", "1"])
    assert result.exit_code == 0 and not v1.exists(), result.output
    assert verify(v2)[0] == 0 and check_opens(v2)
    assert all(p.stat().st_nlink == 1 for p in v2.rglob("*.arrow"))


def test_the_newer_version_removed_leaves_the_earlier_intact(two: tuple[Path, Path]) -> None:
    v1, v2 = two
    remove_tree(v2)  # what gc does to a version folder (Folder.remove_tree)
    assert verify(v1)[0] == 0 and check_opens(v1)


def test_a_flipped_byte_in_the_earlier_file_is_not_spread(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    v1 = first_version(tmp_path)
    damaged = next(p for p in listed(v1) if p.startswith("shards/"))
    writable(v1)
    flip_byte(v1 / damaged)
    sealed(v1)  # the earlier version's modes again: only the re-hash can tell
    with caplog.at_level(logging.INFO, logger="curate.shared_files"):
        v2 = second_version(tmp_path)
    assert not same_file(v1 / damaged, v2 / damaged)
    assert (v2 / damaged).stat().st_nlink == 1
    assert any(damaged in r.message and "damaged" in r.message for r in caplog.records)
    assert any(same_file(v1 / p, v2 / p) for p in listed(v2) if p != damaged)  # others linked
    assert verify(v2)[0] == 0
    code, out = verify(v1)
    assert code != 0 and damaged in out


def test_another_file_mode_is_copied_not_linked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    v1 = first_version(tmp_path)
    with caplog.at_level(logging.INFO, logger="curate.shared_files"):
        v2 = second_version(tmp_path, file_mode="0600")
    assert not any(same_file(v1 / p, v2 / p) for p in listed(v2))
    assert all(p.stat().st_nlink == 1 for p in [*v1.rglob("*.arrow"), *v2.rglob("*.arrow")])
    assert any("mode 0440" in r.message for r in caplog.records)
    assert all(os.stat(p).st_mode & 0o777 == 0o440 for p in v1.rglob("*.arrow"))  # unchanged
    assert verify(v1)[0] == 0 and verify(v2)[0] == 0


def test_verify_names_every_version_holding_a_damaged_shared_file(two: tuple[Path, Path]) -> None:
    v1, v2 = two
    path = next(p for p in listed(v2) if same_file(v1 / p, v2 / p))
    os.chmod(v2 / path, 0o640)  # one inode: v1's file is made writable too
    flip_byte(v2 / path)
    for damaged, other in ((v2, "v1"), (v1, "v2")):
        code, out = verify(damaged)
        assert code != 0
        line = next(x for x in out.splitlines() if path in x)
        assert f"is in {other} too" in line, line
    own = next(p for p in listed(v2) if not same_file(v1 / p, v2 / p))
    assert own not in out  # an intact file of its own is not named


def tree_bytes(version: Path, *, links: int | None = None) -> int:
    return sum(
        p.stat().st_size
        for p in version.rglob("*")
        if p.is_file() and (links is None or p.stat().st_nlink == links)
    )


def test_gc_reports_only_the_space_it_frees(two: tuple[Path, Path], tmp_path: Path) -> None:
    v1, _v2 = two
    frees = tree_bytes(v1, links=1)
    assert frees < tree_bytes(v1)  # shared files free nothing
    result = CliRunner().invoke(main, ["gc", str(tmp_path / "out" / "t"), "--keep", "1"])
    assert result.exit_code == 0 and not v1.exists(), result.output
    assert f"freed {format_size(frees)}" in result.output, result.output


def test_log_shows_each_version_s_own_and_shared_bytes(
    two: tuple[Path, Path], tmp_path: Path
) -> None:
    v1, v2 = two
    rows = {r["version"]: r for r in log_rows(tmp_path / "out") if "version" in r}
    for name, version in (("v1", v1), ("v2", v2)):
        own, shared = rows[name]["own_bytes"], rows[name]["shared_bytes"]
        assert (own, shared) == (tree_bytes(version, links=1), tree_bytes(version, links=2))
        assert shared > 0 and own + shared == tree_bytes(version)
    assert rows["v1"]["shared_bytes"] == rows["v2"]["shared_bytes"]
    text = CliRunner().invoke(main, ["log", str(tmp_path / "out")]).output
    size = f"{format_size(rows['v2']['own_bytes'])} own, {format_size(rows['v2']['shared_bytes'])}"
    assert f"{size} shared" in text, text


def test_a_shard_written_again_never_writes_through_a_shared_link(tmp_path: Path) -> None:
    """A resumed run rewriting a staged file that publishing had linked to an earlier version
    makes a new file: the earlier version's bytes and inode stay as they are."""
    table = pa.table({"id": ["a", "b"], "text": ["x", "y"]})
    earlier = tmp_path / "earlier.arrow"
    write_table(earlier, table)
    before = earlier.read_bytes(), earlier.stat().st_mtime_ns
    staged = tmp_path / "staged.arrow"
    os.link(earlier, staged)
    write_table(staged, pa.table({"id": ["c"], "text": ["z"]}))
    assert (earlier.read_bytes(), earlier.stat().st_mtime_ns) == before
    assert not same_file(earlier, staged) and earlier.stat().st_nlink == 1


@pytest.mark.parametrize("nth", [1, 3])
def test_a_kill_while_linking_leaves_nothing_visible_and_the_rerun_publishes_the_same(
    tmp_path: Path, nth: int
) -> None:
    v1 = first_version(tmp_path)
    before = {p: (p.stat().st_mtime_ns, p.stat().st_ino) for p in v1.rglob("*.arrow")}
    write_jsonl(tmp_path / "data" / "c.jsonl", new_docs())
    recipe = make_recipe(tmp_path)
    env = {**os.environ, "CURATE_PHASE_LOG": str(tmp_path / "phases.log")}
    cmd = [sys.executable, "-m", "curate.cli", "run", str(recipe), "--quiet"]
    killed = subprocess.run(cmd, env=env | {"CURATE_KILL_AT": f"share:{nth}"},
                            capture_output=True, start_new_session=True)  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
    dataset = tmp_path / "out" / "t"
    assert sorted(p.name for p in dataset.glob("v*")) == ["v1"]
    assert (dataset / "LATEST").read_text().strip() == "v1"
    resumed = subprocess.run(cmd, env=env, capture_output=True)
    assert resumed.returncode == 0, resumed.stderr.decode()
    v2 = dataset / "v2"
    assert verify(v1)[0] == 0 and verify(v2)[0] == 0
    assert {p: (p.stat().st_mtime_ns, p.stat().st_ino) for p in v1.rglob("*.arrow")} == before
    assert any(same_file(v1 / p, v2 / p) for p in listed(v2))
    assert not [p for p in v2.rglob(".*")]  # no temporary link published
    scratch = curate.run(make_recipe(tmp_path, root="scratch"))
    assert {p: f["sha256"] for p, f in listed(v2).items()} == {
        p: f["sha256"] for p, f in listed(scratch.path).items()
    }


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_file_of_another_owner_is_copied_not_linked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    v1 = first_version(tmp_path)
    for p in v1.rglob("*.arrow"):
        os.chown(p, 65534, -1, follow_symlinks=False)  # another user's file: never adopted
    with caplog.at_level(logging.INFO, logger="curate.shared_files"):
        v2 = second_version(tmp_path)
    assert not any(same_file(v1 / p, v2 / p) for p in listed(v2))
    assert any("belongs to 65534:" in r.message for r in caplog.records)
    assert all(p.stat().st_uid == 65534 for p in v1.rglob("*.arrow"))
    assert verify(v2)[0] == 0


def test_gc_dry_run_counts_what_removing_sharing_versions_together_frees(
    two: tuple[Path, Path], tmp_path: Path
) -> None:
    """v1 and v2 share files and both go (v3, of another file mode, shares nothing): the
    shared files are freed with the second, which each version's bytes alone never count."""
    v1, v2 = two
    write_jsonl(tmp_path / "data" / "d.jsonl", [{"id": "e1", "text": "One more document."}])
    v3 = curate.run(make_recipe(tmp_path, file_mode="0600"))
    v3.release()
    assert not any(same_file(v2 / p, v3.path / p) for p in listed(v3.path))
    inodes = {(p.stat().st_dev, p.stat().st_ino): p.stat().st_size
              for v in (v1, v2) for p in v.rglob("*") if p.is_file()}  # fmt: skip
    shared = sum(1 for p in listed(v2) if same_file(v1 / p, v2 / p))
    assert shared
    dataset = str(tmp_path / "out" / "t")
    dry = collect(Path(dataset), 1, dry_run=True)
    assert [a.outcome for a in dry] == ["would remove", "would remove"]
    assert sum(a.bytes for a in dry) == sum(inodes.values())  # every inode of both, once
    result = CliRunner().invoke(main, ["gc", dataset, "--keep", "1"])
    assert result.exit_code == 0 and not v1.exists() and not v2.exists(), result.output
    assert f"freed {format_size(sum(inodes.values()))}" in result.output, result.output
    dry_text = CliRunner().invoke(main, ["gc", dataset, "--keep", "1", "--dry-run"]).output
    assert dry_text.strip() == "would free 0 B", dry_text

"""Data that must stay in the building: no network, owner+group modes, no text in logs."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, write_recipe

BLOCK_NETWORK = """
import socket, sys
def refuse(*args, **kwargs):
    raise RuntimeError(f"network access attempted: {args!r}")
def guard(real):
    def connect(self, address, *args):
        if self.family in (socket.AF_INET, socket.AF_INET6):  # local Unix sockets are not network
            refuse(address)
        return real(self, address, *args)
    return connect
socket.socket.connect = guard(socket.socket.connect)
socket.socket.connect_ex = guard(socket.socket.connect_ex)
socket.create_connection = refuse
socket.getaddrinfo = refuse
from curate.cli import main
sys.argv = ["curate", "run", sys.argv[1]]
main()
"""


def sample_copy(tmp_path: Path) -> Path:
    """The sample recipe, pointed at the repository's sample data, writing under tmp_path."""
    recipe = yaml.safe_load((REPO / "recipes" / "sample.yaml").read_text())
    base = REPO / "recipes"
    recipe["inputs"] = [str((base / p).resolve()) for p in recipe["inputs"]]
    recipe["output"]["root"] = str(tmp_path / "out")
    # files a stage names (a tokenizer, benchmark files), however deep, stay where they are
    recipe["stages"] = absolute_paths(recipe["stages"], base)
    path = tmp_path / "sample.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


def absolute_paths(value: Any, base: Path) -> Any:
    """`value` with every string that names an existing file under `base` made absolute."""
    if isinstance(value, dict):
        return {key: absolute_paths(item, base) for key, item in value.items()}
    if isinstance(value, list):
        return [absolute_paths(item, base) for item in value]
    if isinstance(value, str) and value and (base / value).exists():
        return str((base / value).resolve())
    return value


def run_offline(
    recipe: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCK_NETWORK, str(recipe)],
        capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_sample_recipe_runs_with_the_network_blocked(tmp_path: Path) -> None:
    result = run_offline(sample_copy(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "network access attempted" not in result.stdout + result.stderr
    assert "wrote sample v1" in result.stdout


def test_everything_written_is_owner_and_group_only(tmp_path: Path) -> None:
    os.umask(0o022)  # a permissive umask must not leak into what curate writes
    result = run_offline(sample_copy(tmp_path))
    assert result.returncode == 0, result.stderr
    for path in [tmp_path / "out", *(tmp_path / "out").rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert not mode & 0o007, f"{path} is {oct(mode)}"
    version = tmp_path / "out" / "sample" / "v1"
    assert stat.S_IMODE(version.stat().st_mode) == 0o550  # published: read-only
    assert stat.S_IMODE((version / "manifest.json").stat().st_mode) == 0o440


def test_no_document_text_in_output_at_the_default_log_level(tmp_path: Path) -> None:
    result = run_offline(sample_copy(tmp_path))
    assert result.returncode == 0, result.stderr
    printed = result.stdout + result.stderr
    texts = []
    for path in (REPO / "sample_data" / "web").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            try:
                texts.append(json.loads(line)["text"])
            except (ValueError, KeyError, TypeError):
                continue
    snippets = {t.strip()[:40] for t in texts if isinstance(t, str) and len(t.strip()) >= 40}
    assert snippets and not [s for s in snippets if s in printed]


def test_custom_stages_come_only_from_dotted_paths_in_the_recipe(tmp_path: Path) -> None:
    from curate.stages.registry import resolve

    for name in ("os.system", "subprocess:Popen", "builtins.eval"):
        try:
            resolve(name)
        except Exception as exc:  # a CurateError naming what is wrong
            assert "not a curate Stage class" in str(exc) or "cannot import" in str(exc)
        else:
            raise AssertionError(f"{name} resolved to a stage")


RUN_UNDER_UMASK = """
import os, sys
from pathlib import Path
os.umask(int(sys.argv[2], 8))
import curate
recipe = Path(sys.argv[1])
version = curate.run(recipe)
os.utime(recipe.parent / "data" / "a.jsonl")  # content identity: re-hashed, cache rewritten
assert curate.run(recipe).up_to_date
curate.open(version.path.parent)  # a reader takes its lock under .locks/
if len(sys.argv) > 3:  # a second version, then gc (its own lock, the readers' locks)
    (recipe.parent / "data" / "a.jsonl").write_text('{"id": "new", "text": "new text"}\\n')
    curate.run(recipe)
    dataset = version.path.parent
    del version  # its read lock would keep v1
    from curate.gc import collect
    assert [a.outcome for a in collect(dataset, keep=1)] == ["removed"]
"""


@pytest.mark.parametrize(
    ("umask", "dir_mode", "file_mode", "gc"),
    [("000", 0o750, 0o640, False), ("077", 0o770, 0o660, False), ("077", 0o770, 0o660, True)],
)
def test_every_folder_and_file_under_the_root_has_the_recipes_modes(
    project: Path, umask: str, dir_mode: int, file_mode: int, gc: bool
) -> None:
    # umask 000 must not make anything world-writable; umask 077 must not lock out the group
    # that shares the root (dir_mode 0770). Every path curate creates, on every code path:
    # the root and its missing parents, the content-hash cache, locks, index, LATEST.
    output = {"root": "made/by/curate", "fsync": False}
    output |= {"dir_mode": f"{dir_mode:04o}", "file_mode": f"{file_mode:04o}"}
    recipe = write_recipe(project, input_identity="content", output=output)
    result = subprocess.run(
        [sys.executable, "-c", RUN_UNDER_UMASK, str(recipe), umask, *(["gc"] if gc else [])],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    made = project / "made"
    assert (made / "by" / "curate" / "t" / ".cache" / "input-hashes.json").is_file()
    sealed_dir, sealed_file = dir_mode & ~0o222, file_mode & ~0o222
    wrong = []
    for path in [made, *made.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        allowed = (dir_mode, sealed_dir) if path.is_dir() else (file_mode, sealed_file)
        if mode not in allowed:
            wrong.append(f"{path.relative_to(project)} {oct(mode)}")
    assert not wrong


def test_the_content_hash_cache_is_never_read_or_written_through_a_link(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A dataset folder's `.cache` planted as a link out of it made a run read a hash cache
    from there and replace the `input-hashes.json` it found (someone's file, now 0640)."""
    import curate

    dataset = curate.run(write_recipe(project, input_identity="content")).path.parent
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "input-hashes.json").write_text('{"theirs": 1}\n')
    (elsewhere / "input-hashes.json").chmod(0o644)
    shutil.rmtree(dataset / ".cache")
    (dataset / ".cache").symlink_to(elsewhere)
    with pytest.raises(curate.CurateError, match=r"\.cache is a symbolic link"):
        curate.run(write_recipe(project, input_identity="content", stages=[]))
    assert (elsewhere / "input-hashes.json").read_text() == '{"theirs": 1}\n'
    assert stat.S_IMODE((elsewhere / "input-hashes.json").stat().st_mode) == 0o644
    assert [p.name for p in elsewhere.iterdir()] == ["input-hashes.json"]


def test_a_run_never_stages_through_a_link(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A `.staging-<fingerprint>` planted as a link out of the dataset folder made the run
    write its partitions where it leads (and resume from what it found there)."""
    import curate

    recipe = write_recipe(project)
    version = curate.run(recipe)
    version.release()
    dataset, fp = version.path.parent, version.fingerprint
    for p in [version.path, *version.path.rglob("*")]:
        p.chmod(0o750 if p.is_dir() else 0o640)
    shutil.rmtree(version.path)
    shutil.rmtree(dataset / ".index")
    (dataset / "LATEST").unlink()
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "keep.txt").write_text("theirs\n")
    (dataset / f".staging-{fp[:20]}").symlink_to(elsewhere)
    with pytest.raises(curate.CurateError, match=rf"\.staging-{fp[:20]} is a symbolic link"):
        curate.run(recipe)
    assert [p.name for p in elsewhere.iterdir()] == ["keep.txt"]


@pytest.mark.parametrize("lock", [".publish.lock", "build"])
def test_a_run_never_truncates_a_file_a_lock_link_leads_to(
    project: Path, tmp_path_factory: pytest.TempPathFactory, lock: str
) -> None:
    """A run's locks are truncated and stamped with its pid: one planted as a link to
    someone's file emptied that file."""
    import curate

    first = curate.run(write_recipe(project))
    first.release()
    dataset = first.path.parent
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    theirs = elsewhere / "important.txt"
    theirs.write_text("theirs\n")
    if lock == "build":  # the next recipe's build lock, named by its fingerprint
        other = curate.run(write_recipe(project, stages=[]))
        other.release()
        name = f".lock-{other.fingerprint[:20]}"
        for p in [other.path, *other.path.rglob("*")]:
            p.chmod(0o750 if p.is_dir() else 0o640)
        shutil.rmtree(other.path)
        shutil.rmtree(dataset / ".index")
    else:
        name = lock
    (dataset / name).unlink()
    (dataset / name).symlink_to(theirs)
    with pytest.raises(curate.CurateError, match="symbolic link"):
        curate.run(write_recipe(project, stages=[]))
    assert theirs.read_text() == "theirs\n"


def test_a_run_never_files_its_index_entry_through_a_link(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """`.index` planted as a link out of the dataset folder made publishing write its entry
    (a file named by the fingerprint) wherever the link leads."""
    import curate

    dataset = curate.run(write_recipe(project)).path.parent
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    shutil.rmtree(dataset / ".index")
    (dataset / ".index").symlink_to(elsewhere)
    with pytest.raises(curate.CurateError, match=r"\.index is a symbolic link"):
        curate.run(write_recipe(project, stages=[]))
    assert list(elsewhere.iterdir()) == []

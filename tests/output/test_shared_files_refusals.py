"""What the kernel refuses when publishing links an unchanged file, tested for real.

curate.shared_files links a file of an earlier version only when owner, group and mode
match, and keeps the copy (saying why in one log line) on any refusal. Each refusal here is
the real one, no mock: a second user (nobody, uid 65534) publishing beside root's version;
protected_hardlinks' EPERM (/proc/sys/fs/protected_hardlinks is 1 on this machine); EXDEV
between tmpfs (/dev/shm) and the ext4 root; EMLINK at ext4's 65,000 links per inode.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, write_jsonl
from test_shared_files import (
    check_opens,
    first_version,
    listed,
    make_recipe,
    new_docs,
    same_file,
    verify,
)

import curate
from curate.dirfd import Folder
from curate.manifest import FileRecord
from curate.shared_files import share_unchanged
from curate.store import Store

NOBODY = 65534
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="running as a second user (nobody) and chown need root"
)


@pytest.fixture
def shared_root() -> Iterator[Path]:
    """A project folder every user can reach (pytest's tmp_path is root's alone, 0700)."""
    base = Path(tempfile.mkdtemp(prefix="curate-users-"))
    os.chmod(base, 0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base)


def nobody_env(home: Path) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "HOME": str(home), "PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1"}


def give_to_nobody(dataset: Path, keep: Path) -> None:
    """The dataset folder and its bookkeeping (index, locks, stage cache, LATEST) handed to
    nobody; the version `keep` stays root's, as one published by a colleague."""
    for dirpath, dirs, files in os.walk(dataset):
        if Path(dirpath) == keep:
            dirs.clear()
            continue
        for name in [*dirs, *files]:
            if Path(dirpath, name) != keep:
                os.chown(Path(dirpath, name), NOBODY, NOBODY, follow_symlinks=False)
    os.chown(dataset, NOBODY, NOBODY)


def records_of(version: Path) -> list[FileRecord]:
    m = json.loads((version / "manifest.json").read_text())
    return [FileRecord(**f) for kind in ("shards", "rejected", "quarantine") for f in m[kind]]


def staged_copy(version: Path, staging: Path) -> None:
    """A staging folder whose `out` holds copies of every file `version` lists: what a rerun
    stages before publishing shares them."""
    for record in records_of(version):
        target = staging / "out" / record.path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(version / record.path, target)


@needs_root
def test_a_second_user_s_build_copies_root_s_files_and_says_why(shared_root: Path) -> None:
    project = shared_root / "p"
    project.mkdir()
    os.chmod(project, 0o755)
    v1 = first_version(project, file_mode="0644", dir_mode="0755")  # readable by every user
    dataset = v1.parent
    write_jsonl(project / "data" / "c.jsonl", new_docs())
    recipe = make_recipe(project, file_mode="0644", dir_mode="0755")
    give_to_nobody(dataset, keep=v1)
    run = subprocess.run(
        [*AS_NOBODY, sys.executable, "-m", "curate.cli", "-v", "run", str(recipe), "--quiet"],
        cwd=project, env=nobody_env(shared_root), capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    v2 = dataset / "v2"
    assert all(p.stat().st_uid == NOBODY for p in v2.rglob("*.arrow"))
    assert all(p.stat().st_uid == 0 and p.stat().st_nlink == 1 for p in v1.rglob("*.arrow"))
    shared = [p for p in listed(v2) if p in listed(v1)]
    assert shared and not any(same_file(v1 / p, v2 / p) for p in shared)
    for path in shared:  # each copy says why, in one line
        lines = [x for x in run.stderr.splitlines() if f"{path}: kept a copy" in x]
        assert (
            len(lines) == 1
            and f"belongs to 0:0, the new version's files to {NOBODY}:" in (lines[0])
        ), run.stderr
    for version in (v1, v2):
        assert verify(version)[0] == 0
        check_opens(version)
    as_nobody = subprocess.run(
        [*AS_NOBODY, sys.executable, "-m", "curate.cli", "verify", str(v2)],
        env=nobody_env(shared_root), capture_output=True, text=True,
    )  # fmt: skip
    assert as_nobody.returncode == 0, as_nobody.stdout + as_nobody.stderr


SHARE_AS_NOBODY = """
import json, sys
from pathlib import Path
from curate.manifest import FileRecord
from curate.shared_files import share_unchanged
from curate.store import Store
root, staging, records = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
store = Store(Path(root), "t", dir_mode=0o755, file_mode=0o644)
with store.dataset().folder(staging) as folder:
    shared = share_unchanged(store, folder, [FileRecord(**r) for r in records])
print(json.dumps({"linked": shared.linked, "copied": shared.copied}))
"""


@needs_root
def test_protected_hardlinks_refuse_nobody_a_file_the_owner_check_passes(
    shared_root: Path,
) -> None:
    """EPERM for real. Through a run it cannot happen: a run's staged files are its own user's,
    the owner check then asks the earlier file to be that user's too, and the kernel lets a
    file's owner link it. It happens when the staged files are another user's (a staging
    folder root made, which nobody may write): the owner check passes (root's and root's) and
    protected_hardlinks refuses nobody a link to a file it may read but not write. So the
    routine publish calls, share_unchanged, is run as nobody on such a staging folder."""
    project = shared_root / "p"
    project.mkdir()
    os.chmod(project, 0o755)
    v1 = first_version(project, file_mode="0644", dir_mode="0755")
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o444 for p in v1.rglob("*.arrow"))
    dataset = v1.parent
    staging = dataset / ".staging-0123456789abcdef0123"
    staged_copy(v1, staging)  # root's files, in folders nobody may write
    for dirpath, _dirs, _files in os.walk(staging):
        os.chmod(dirpath, 0o777)
    records = records_of(v1)
    before = {p: p.stat().st_ino for p in staging.rglob("*.arrow")}
    run = subprocess.run(
        [*AS_NOBODY, sys.executable, "-c", SHARE_AS_NOBODY, str(dataset.parent), staging.name,
         json.dumps([r.model_dump() for r in records])],
        env=nobody_env(shared_root), capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    shared = json.loads(run.stdout)
    assert shared["linked"] == []
    assert sorted(shared["copied"]) == sorted(r.path for r in records)
    for path, why in shared["copied"].items():
        assert why == f"v1/{path} cannot be linked (EPERM: Operation not permitted)", why
    assert {p: p.stat().st_ino for p in staging.rglob("*.arrow")} == before  # copies kept
    assert all(p.stat().st_nlink == 1 for p in v1.rglob("*.arrow"))
    # the same call as root (CAP_FOWNER): the kernel links them, so the refusal was nobody's
    store = Store(dataset.parent, "t", dir_mode=0o755, file_mode=0o644)
    with store.dataset().folder(staging.name) as folder:
        as_root = share_unchanged(store, folder, records)
    store.close()
    assert sorted(as_root.linked) == sorted(r.path for r in records) and not as_root.copied


def test_a_file_on_another_filesystem_is_copied_exdev(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The staging folder on tmpfs (/dev/shm), the earlier version on the ext4 root."""
    if os.stat("/dev/shm").st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("/dev/shm is on the same filesystem as the test's folder here")
    v1 = first_version(tmp_path)
    records = records_of(v1)
    shm = Path(tempfile.mkdtemp(dir="/dev/shm", prefix="curate-exdev-"))
    try:
        staged_copy(v1, shm)
        store = Store(v1.parent.parent, "t")
        with caplog.at_level(logging.INFO, logger="curate.shared_files"), Folder.open(shm) as f:
            shared = share_unchanged(store, f, records)
        store.close()
        assert shared.linked == [] and sorted(shared.copied) == sorted(r.path for r in records)
        for path, why in shared.copied.items():
            assert why == f"v1/{path} cannot be linked (EXDEV: Invalid cross-device link)"
            assert any(path in r.message and "EXDEV" in r.message for r in caplog.records)
            assert (shm / "out" / path).read_bytes() == (v1 / path).read_bytes()
            assert (shm / "out" / path).stat().st_nlink == 1
    finally:
        shutil.rmtree(shm)
    assert verify(v1)[0] == 0


EXT4_LINK_MAX = 65000


def test_a_file_at_the_link_limit_is_copied_emlink(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One shard of v1 given 64,999 more links (ext4's limit is 65,000 per inode): the run that
    would link it keeps a copy and says EMLINK; the others are linked as usual."""
    v1 = first_version(tmp_path)
    full = next(p for p in sorted(listed(v1)) if p.startswith("shards/"))
    many = tmp_path / "many"
    many.mkdir()
    try:
        for i in range(EXT4_LINK_MAX - 1):
            os.link(v1 / full, many / str(i))
    except OSError as exc:  # another filesystem (xfs, btrfs, tmpfs) has another limit
        shutil.rmtree(many)
        pytest.skip(f"not ext4's limit here: {exc}")
    assert (v1 / full).stat().st_nlink == EXT4_LINK_MAX
    try:
        write_jsonl(tmp_path / "data" / "c.jsonl", new_docs())
        with caplog.at_level(logging.INFO, logger="curate.shared_files"):
            v2 = _run(make_recipe(tmp_path))
    finally:
        shutil.rmtree(many)
    assert not same_file(v1 / full, v2 / full) and (v2 / full).stat().st_nlink == 1
    lines = [r.message for r in caplog.records if full in r.message]
    assert lines == [f"{full}: kept a copy, not linked to an earlier version: v1/{full} "
                     "cannot be linked (EMLINK: Too many links)"], lines  # fmt: skip
    assert any(same_file(v1 / p, v2 / p) for p in listed(v2) if p != full)
    for version in (v1, v2):
        assert verify(version)[0] == 0
        check_opens(version)


def _run(recipe: Path) -> Path:
    version = curate.run(recipe)
    version.release()
    return version.path

"""curate gc keeps the newest N, LATEST and versions a reader holds, and reports space freed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import write_recipe

import curate
from curate.cli import main
from curate.errors import CurateError


def build(project: Path, n: int) -> list[curate.Version]:
    out = []
    for i in range(n):
        recipe = write_recipe(project, stages=[{"filter_length": {"min_chars": i}}])
        v = curate.run(recipe)
        v.release()
        out.append(v)
    return out


def test_gc_keeps_newest_latest_and_held(project: Path) -> None:
    versions = build(project, 4)
    held = curate.open(project / "out" / "t", "v2").hold()
    result = CliRunner().invoke(main, ["gc", str(project / "out"), "--keep", "1"])
    assert result.exit_code == 0, result.stderr
    assert "t/v1: removed" in result.stdout and "t/v3: removed" in result.stdout
    assert "t/v2: kept, a reader holds it" in result.stdout
    assert "freed " in result.stdout and "freed 0 B" not in result.stdout
    left = sorted(p.name for p in (project / "out" / "t").iterdir() if p.name.startswith("v"))
    assert left == ["v2", "v4"]
    held.release()
    # a removed version's fingerprint no longer resolves: asking for it again rebuilds
    again = curate.run(write_recipe(project, stages=[{"filter_length": {"min_chars": 0}}]))
    assert not again.up_to_date and again.name == "v5"
    assert versions[-1].path.exists()


def test_versions_opened_for_reading_are_not_collected(project: Path) -> None:
    from curate.loader import open_tokens

    tokenizer = str(Path(__file__).parent.parent / "sample_data" / "tokenizer")
    for i in range(3):
        stages = [{"filter_length": {"min_chars": i}}, {"tokenize": {"source": tokenizer}}]
        curate.run(write_recipe(project, stages=stages)).release()
    notebook = curate.open(project / "out" / "t", "v1")  # a notebook reading v1
    trainer = open_tokens(project / "out" / "t", "v2")  # a trainer reading v2
    result = CliRunner().invoke(main, ["gc", str(project / "out"), "--keep", "1"])
    assert "t/v1: kept, a reader holds it" in result.stdout
    assert "t/v2: kept, a reader holds it" in result.stdout
    assert notebook.to_arrow().num_rows and len(trainer.blocks(16))
    notebook.release()
    trainer.version.release()
    result = CliRunner().invoke(main, ["gc", str(project / "out"), "--keep", "1"])
    assert "t/v1: removed" in result.stdout and "t/v2: removed" in result.stdout


def gc(*args: str | Path) -> Result:
    return CliRunner().invoke(main, ["gc", *map(str, args)])


def tree(folder: Path) -> dict[str, int]:
    """Every entry under a folder (links not followed) with its mode: what gc must not touch."""
    return {
        str(p.relative_to(folder)): p.lstat().st_mode for p in [folder, *sorted(folder.rglob("*"))]
    }


def writable(folder: Path) -> None:
    for p in [folder, *folder.rglob("*")]:
        if not p.is_symlink():
            p.chmod(0o755 if p.is_dir() else 0o644)


def test_gc_deletes_only_folders_whose_own_manifest_names_them(project: Path) -> None:
    shared = project / "shared"
    for v in ("v1", "v2", "v3"):  # mkdir -p shared/checkpoints/{v1,v2,v3}: a trainer's, not ours
        (shared / "checkpoints" / v).mkdir(parents=True)
        (shared / "checkpoints" / v / "model.bin").write_bytes(b"w" * 1000)
    before = tree(shared)
    for target in (shared, shared / "checkpoints"):
        result = gc(target, "--keep", "1")
        assert tree(shared) == before, result.stdout
        assert "removed" not in result.stdout

    build(project, 3)
    dataset = project / "out" / "t"
    writable_copy = project / "copy"
    shutil.copytree(dataset / "v2", writable_copy)
    writable(writable_copy)
    (dataset / "v7").mkdir()  # someone's folder that happens to be named like a version
    (dataset / "v7" / "notes.txt").write_text("mine")
    shutil.copytree(writable_copy, dataset / "v8")  # `cp -r v2 v8`: its manifest names v2
    shutil.copytree(writable_copy, dataset / "v9")  # a version of another dataset
    m = json.loads((dataset / "v9" / "manifest.json").read_text())
    (dataset / "v9" / "manifest.json").write_text(json.dumps(m | {"dataset": "other"}))
    shutil.copytree(writable_copy, dataset / "v10")  # a manifest curate cannot read
    (dataset / "v10" / "manifest.json").write_text("{not json")
    foreign = {v: tree(dataset / v) for v in ("v7", "v8", "v9", "v10")}

    result = gc(dataset, "--keep", "1")
    assert result.exit_code == 1, result.output  # something was refused
    assert "t/v1: removed" in result.stdout and "t/v2: removed" in result.stdout
    for v in foreign:
        assert f"t/{v}: skipped" in result.stdout, result.stdout
        assert tree(dataset / v) == foreign[v]
    assert (dataset / "v3" / "manifest.json").is_file() and not (dataset / "v1").exists()
    log = cli_ok("log", dataset).splitlines()
    for v in foreign:
        assert any(line.startswith(f"t/{v}  left alone by gc: ") for line in log), log


def test_gc_never_follows_a_symlink(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    build(project, 3)
    out, dataset = project / "out", project / "out" / "t"
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "sub" / "deeper").mkdir(parents=True)
    (elsewhere / "sub" / "data.bin").write_bytes(b"x" * 100)
    for p in (elsewhere, elsewhere / "sub", elsewhere / "sub" / "deeper"):
        p.chmod(0o755)
    # another team's dataset, in another root, linked into ours as a dataset folder
    other = tmp_path_factory.mktemp("other")
    shutil.copytree(project / "data", other / "data")
    for i in range(3):
        stages = [{"filter_length": {"min_chars": i}}]
        curate.run(write_recipe(other, name="theirs", stages=stages)).release()
    (out / "theirs").symlink_to(other / "out" / "theirs")
    (dataset / "v0").symlink_to(elsewhere)  # a version folder that is a link out of the root
    v1 = dataset / "v1"
    v1.chmod(0o750)
    (v1 / "escape").symlink_to(elsewhere)  # a link inside a version is removed, never entered
    v1.chmod(0o550)
    theirs, mine = tree(other / "out" / "theirs"), tree(elsewhere)

    result = gc(out, "--keep", "1")
    assert result.exit_code == 1, result.output
    assert "t/v1: removed" in result.stdout and "t/v2: removed" in result.stdout
    assert "t/v0: skipped" in result.stdout and "symbolic link" in result.stdout
    assert "theirs: skipped" in result.stdout
    assert tree(other / "out" / "theirs") == theirs
    assert tree(elsewhere) == mine
    assert (dataset / "v0").is_symlink()
    named = gc(out / "theirs", "--keep", "1")  # a link named on the command line is not followed
    assert named.exit_code == 2 and "symbolic link" in named.stderr
    assert tree(other / "out" / "theirs") == theirs


def test_gc_and_readers_never_follow_a_symlinked_locks_folder(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The read locks live in `.locks/`: a `.locks` planted as a link out of the dataset made
    gc lock and then unlink `<version>.lock` files in the folder it leads to (someone's own
    files), and readers create their locks there."""
    build(project, 3)
    dataset = project / "out" / "t"
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    for name in ("v1.lock", "v2.lock", "v3.lock"):
        (elsewhere / name).write_text("not curate's\n")
    shutil.rmtree(dataset / ".locks", ignore_errors=True)
    (dataset / ".locks").symlink_to(elsewhere)
    mine = tree(elsewhere)
    reader = curate.open(dataset, "v3").hold()
    result = gc(dataset, "--keep", "1")
    assert result.exit_code == 1, result.output
    assert "removed" not in result.stdout and "symbolic link" in result.stdout
    assert tree(elsewhere) == mine
    assert sorted(p.name for p in dataset.iterdir() if p.name.startswith("v")) == ["v1", "v2", "v3"]
    reader.release()


def rename_dataset(src: Path, dst: Path) -> None:
    """A dataset folder copied under another name, its manifests saying so (as a recipe named
    like the folder would have made it)."""
    shutil.copytree(src, dst, symlinks=True)
    writable(dst)
    for manifest in dst.glob("v*/manifest.json"):
        m = json.loads(manifest.read_text())
        manifest.write_text(json.dumps(m | {"dataset": dst.name}))


def test_datasets_named_like_versions_are_not_taken_for_versions(project: Path) -> None:
    build(project, 2)
    out = project / "out"
    rename_dataset(out / "t", out / "v1")
    rename_dataset(out / "t", out / "v2")
    shutil.rmtree(out / "t")
    assert "v1/v1" in cli_ok("log", out) and "v2/v2" in cli_ok("log", out)

    result = gc(out, "--keep", "1")  # a root of several datasets: name one, or --all
    assert result.exit_code == 2 and "v1" in result.stderr and "v2" in result.stderr
    assert (out / "v1" / "v1").is_dir() and (out / "v2" / "v1").is_dir()
    result = gc(out, "--keep", "1", "--all")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == ["v1", "v2"]
    for name in ("v1", "v2"):
        assert not (out / name / "v1").exists() and (out / name / "v2" / "manifest.json").is_file()


def test_a_recipe_cannot_name_its_dataset_like_a_version(project: Path) -> None:
    recipe = write_recipe(project, name="v1")
    with pytest.raises(CurateError, match=r"recipe\.yaml:1: name: 'v1' .*version"):
        curate.run(recipe)
    assert not (project / "out").exists()


def test_gc_of_a_root_of_several_datasets_needs_all_and_dry_run_deletes_nothing(
    project: Path,
) -> None:
    build(project, 3)
    for i in range(2):
        curate.run(write_recipe(project, name="u", stages=[{"filter_length": {"min_chars": i}}]))
    out = project / "out"
    before = tree(out)

    result = gc(out, "--keep", "1")
    assert result.exit_code == 2
    assert "t" in result.stderr and "u" in result.stderr and "--all" in result.stderr
    assert tree(out) == before

    dry = gc(out, "--keep", "1", "--all", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert tree(out) == before
    would = sorted(line for line in dry.stdout.splitlines() if "would remove" in line)
    assert [line.split(":")[0] for line in would] == ["t/v1", "t/v2", "u/v1"], dry.stdout

    real = gc(out, "--keep", "1", "--all")
    assert real.exit_code == 0, real.output
    removed = sorted(line for line in real.stdout.splitlines() if ": removed" in line)
    assert [r.replace(": removed", ": would remove") for r in removed] == would  # same bytes
    assert not (out / "t" / "v1").exists() and (out / "u" / "v2").is_dir()
    assert gc(out / "u", "--keep", "1").exit_code == 0  # a dataset folder needs no --all


def test_a_build_holds_the_versions_it_reads_so_gc_cannot_delete_them(project: Path) -> None:
    build(project, 2)  # t/v1 and t/v2
    reader = project / "reader"
    reader.mkdir()
    recipe = write_recipe(
        reader,
        name="derived",
        inputs=["../out/t/v1"],
        stages=[{"custom_stages:Slow": {"seconds": 2.0}}],
    )
    log = project / "phases.log"
    env = {
        **os.environ,
        "CURATE_PHASE_LOG": str(log),
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path]),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "curate.cli", "run", str(recipe), "--quiet"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while "map" not in (log.read_text() if log.exists() else ""):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    result = gc(project / "out" / "t", "--keep", "1")
    assert "t/v1: kept, a reader holds it" in result.stdout, result.stdout
    assert (project / "out" / "t" / "v1" / "manifest.json").is_file()
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()
    made = curate.open(reader / "out" / "derived")
    assert made.counts["written"] == curate.open(project / "out" / "t", "v1").counts["written"]
    assert made.manifest["parents"][0].startswith("t/v1@")
    made.release()
    assert "t/v1: removed" in gc(project / "out" / "t", "--keep", "1").stdout  # released after


def cli_ok(*args: str | Path) -> str:
    result = CliRunner().invoke(main, list(map(str, args)))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_log_shows_and_gc_frees_what_interrupted_runs_left(project: Path) -> None:
    build(project, 1)
    dataset = project / "out" / "t"
    recipe = write_recipe(project, stages=[{"filter_length": {"min_chars": 5}}])
    env = {**os.environ, "CURATE_PHASE_LOG": str(project / "kill.log")}
    killed = subprocess.run(
        [sys.executable, "-m", "curate.cli", "run", str(recipe), "--quiet"],
        env={**env, "CURATE_KILL_AT": "shard_write:1"}, capture_output=True, timeout=300,
        start_new_session=True,
    )  # fmt: skip
    assert killed.returncode == -9, killed.stderr.decode()
    [dead] = dataset.glob(".staging-*")
    live = dataset / ".staging-0123456789abcdef0123"  # a run still going: it holds its lock
    (live / "pass-0").mkdir(parents=True)
    (live / "pass-0" / "data.arrow").write_bytes(b"x" * 5000)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time\n"
         "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('locked', flush=True)\ntime.sleep(600)",
         str(dataset / ".lock-0123456789abcdef0123")],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        deleting = dataset / ".deleting-v9-12345"  # a removal a killed gc did not finish
        (deleting / "shards").mkdir(parents=True)
        (deleting / "shards" / "part.arrow").write_bytes(b"y" * 3000)
        (deleting / "shards").chmod(0o550)
        deleting.chmod(0o550)

        for name in (".staging-notes", ".deleting-mine"):  # named so, but not by curate
            (dataset / name).mkdir()
            (dataset / name / "keep.txt").write_text("not curate's")
        log = cli_ok("log", project / "out").splitlines()
        [dead_line] = [line for line in log if f"t/{dead.name}" in line]
        [live_line] = [line for line in log if f"t/{live.name}" in line]
        [deleting_line] = [line for line in log if "t/.deleting-v9-12345" in line]
        assert "interrupted run" in dead_line and "live run" in live_line, log
        assert "4.9 KB" in live_line or "5.0 KB" in live_line, live_line
        assert "unfinished removal" in deleting_line
        assert not any("v9" in line for line in log if ".deleting" not in line)

        result = gc(dataset, "--keep", "1")
        assert result.exit_code == 0, result.output
        assert f"t/{dead.name}: removed" in result.stdout
        assert f"t/{live.name}: kept, a live run holds it" in result.stdout
        assert "t/.deleting-v9-12345: removed" in result.stdout
        assert not dead.exists() and not deleting.exists()
        for name in (".staging-notes", ".deleting-mine"):
            assert (dataset / name / "keep.txt").is_file()
        assert (live / "pass-0" / "data.arrow").is_file()
    finally:
        holder.kill()
        holder.wait()
    assert curate.run(recipe).name == "v2"  # the interrupted recipe simply builds again
    for name in (".staging-notes", ".deleting-mine"):  # a run's own cleanup leaves them too
        assert (dataset / name / "keep.txt").is_file()


def test_a_run_never_publishes_onto_a_name_a_link_or_foreign_folder_holds(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    build(project, 1)
    dataset = project / "out" / "t"
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (dataset / "v2").symlink_to(elsewhere)
    (dataset / "v3").mkdir()
    v = curate.run(write_recipe(project, stages=[{"filter_length": {"min_chars": 9}}]))
    assert v.name == "v4" and (dataset / "v2").is_symlink() and not any(elsewhere.iterdir())
    v.release()


def test_a_reader_opening_a_version_gc_is_removing_gets_an_error_not_an_empty_folder(
    project: Path,
) -> None:
    import threading

    build(project, 2)
    dataset = project / "out" / "t"
    (dataset / ".locks").mkdir(exist_ok=True)
    gc_like = subprocess.Popen(  # takes v1's lock as gc does, then moves v1 away
        [sys.executable, "-c", "import fcntl, os, sys\n"
         "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('locked', flush=True)\nsys.stdin.readline()\n"
         "os.rename(sys.argv[2], sys.argv[3])",
         str(dataset / ".locks" / "v1.lock"), str(dataset / "v1"), str(dataset / ".deleting-v1-1")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert gc_like.stdout is not None and gc_like.stdin is not None
    assert gc_like.stdout.readline() == "locked\n"
    outcome: list[object] = []

    def open_v1() -> None:
        try:
            outcome.append(curate.open(dataset, "v1"))
        except CurateError as exc:
            outcome.append(exc)

    reader = threading.Thread(target=open_v1)
    reader.start()
    time.sleep(0.5)  # the reader now waits for the lock
    gc_like.stdin.write("go\n")
    gc_like.stdin.flush()
    assert gc_like.wait(timeout=60) == 0
    reader.join(timeout=60)
    assert len(outcome) == 1 and isinstance(outcome[0], CurateError), outcome
    assert "removed" in str(outcome[0])


def test_a_manifest_that_is_a_fifo_is_not_ours_and_does_not_hang_gc_or_log(
    project: Path,
) -> None:
    """Anyone who may write a shared root can plant `v9/manifest.json` as a named pipe: opening
    it to read waits for a writer forever, so `curate log` and `curate gc` hung on it."""
    build(project, 2)
    dataset = project / "out" / "t"
    (dataset / "v9").mkdir()
    os.mkfifo(dataset / "v9" / "manifest.json")
    for args in (["log", str(dataset)], ["gc", str(dataset), "--keep", "1"]):
        try:
            done = subprocess.run(
                [sys.executable, "-m", "curate.cli", *args],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"curate {args[0]} hung on a manifest.json that is a FIFO"
            ) from None
        assert "v9" in done.stdout and "not a regular file" in done.stdout, (
            done.stdout + done.stderr
        )
    assert (dataset / "v9" / "manifest.json").exists() and (dataset / "v2").is_dir()


def test_gc_removes_the_aliases_of_a_version_it_removes(project: Path) -> None:
    """Touched inputs file their stat fingerprint as an alias of the version's ("same-as");
    removing the version removes the alias too, rather than leaving it to lead nowhere."""
    recipe = write_recipe(project)
    v1 = curate.run(recipe)
    v1.release()
    data = project / "data" / "a.jsonl"
    st = data.stat()
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns + 10**11))  # touched, same bytes
    again = curate.run(recipe)
    again.release()
    index = project / "out" / "t" / ".index"
    aliases = [p.name for p in index.iterdir() if p.read_text().startswith("same-as ")]
    assert again.path == v1.path and aliases
    data.write_text(data.read_text() + '{"id": "new", "text": "one more document here"}\n')
    curate.run(recipe).release()  # v2
    result = gc(project / "out" / "t", "--keep", "1")
    assert "t/v1: removed" in result.stdout, result.stdout
    left = {p.name: p.read_text() for p in index.iterdir()}
    assert not set(aliases) & set(left), left
    assert all(text == "v2\n" or text.startswith("same-as ") for text in left.values()), left
    for text in left.values():  # what is left leads somewhere
        assert not text.startswith("same-as ") or text.removeprefix("same-as ").strip() in left

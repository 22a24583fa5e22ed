"""prepare(): cheap when up to date, safe when many processes of one job call it at once."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path

from conftest import corpus, flip_byte, sealed, writable, write_jsonl, write_recipe

import curate


def _prepare(recipe: str, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    v = curate.prepare(recipe)
    queue.put((str(v.path), v.up_to_date))


def _prepare_at_once(recipe: str, callers: int = 4) -> list[tuple[str, bool]]:
    """(version path, up to date) from each of `callers` processes calling prepare() at once,
    as the ranks of one training job do."""
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_prepare, args=(recipe, queue)) for _ in range(callers)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    return results


def test_concurrent_callers_get_one_build(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(3000))
    results = _prepare_at_once(str(write_recipe(tmp_path)))
    paths = {path for path, _ in results}
    assert len(paths) == 1  # everybody got the same version
    assert sum(1 for _, up_to_date in results if not up_to_date) == 1  # exactly one built it
    assert [p.name for p in (tmp_path / "out" / "t").iterdir() if p.name.startswith("v")] == ["v1"]


def test_up_to_date_prepare_reads_no_input(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(500))
    recipe = write_recipe(tmp_path)
    curate.prepare(recipe)
    opened = []
    real_open = open

    def spy(file, *args, **kwargs):  # type: ignore[no-untyped-def]
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", spy)
    started = time.perf_counter()
    v = curate.prepare(recipe)
    elapsed = time.perf_counter() - started
    assert v.up_to_date and elapsed < 0.5
    assert not [f for f in opened if f.endswith(".jsonl")]


def test_content_identity_ignores_touch_and_catches_edits(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "data" / "a.jsonl", corpus(50))
    recipe = write_recipe(tmp_path, input_identity="content")
    v1 = curate.prepare(recipe)
    os.utime(data, (time.time() + 100, time.time() + 100))  # touched, same bytes
    assert curate.prepare(recipe).path == v1.path
    with open(data, "a") as f:
        f.write(json.dumps({"id": "z", "text": "a brand new document"}) + "\n")
    v2 = curate.prepare(recipe)
    assert not v2.up_to_date and v2.name == "v2"
    cache = json.loads((tmp_path / "out" / "t" / ".cache" / "input-hashes.json").read_text())
    assert cache[str(data)]["hash"] == v2.manifest["inputs"][0]["content_hash"]


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def test_damaged_version_is_rebuilt_beside_it(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(500))
    recipe = write_recipe(tmp_path)
    v1 = curate.prepare(recipe)
    writable(v1.path)
    shard = v1.manifest["shards"][0]["path"]
    (v1.path / shard).unlink()
    sealed(v1.path)
    left = _files(v1.path)
    v2 = curate.prepare(recipe)
    assert v2.name == "v2" and not v2.up_to_date and v2.path != v1.path
    assert v2.rebuilt_because == f"v1 is damaged ({shard}: missing)"
    assert f"v1 is damaged ({shard}: missing); building a new version" in caplog.text
    assert _files(v1.path) == left  # the damaged version is neither repaired nor removed
    assert (v1.path.parent / "LATEST").read_text().strip() == "v2"
    again = curate.prepare(recipe)  # the fingerprint now names v2, for good
    assert again.path == v2.path and again.up_to_date
    index = v1.path.parent / ".index" / v1.fingerprint
    assert index.read_text().strip() == "v2"


def test_version_without_its_manifest_is_rebuilt_and_said(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(50))
    recipe = write_recipe(tmp_path)
    v1 = curate.prepare(recipe)
    writable(v1.path)
    (v1.path / "manifest.json").unlink()
    sealed(v1.path)
    v2 = curate.prepare(recipe)
    assert v2.name == "v2" and v2.rebuilt_because == "v1 is damaged (no readable manifest.json)"


def test_cli_run_says_why_it_builds_again(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from curate.cli import main

    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(50))
    recipe = write_recipe(tmp_path)
    v1 = curate.prepare(recipe)
    writable(v1.path)
    shard = v1.path / v1.manifest["shards"][0]["path"]
    shard.write_bytes(shard.read_bytes()[:-10])
    sealed(v1.path)
    result = CliRunner().invoke(main, ["run", "--quiet", str(recipe)])
    assert result.exit_code == 0, result.output
    size, listed = shard.stat().st_size, v1.manifest["shards"][0]["bytes"]
    line = f"v1 is damaged ({shard.relative_to(v1.path)}: size {size}, manifest says {listed})"
    assert f"{line}; built v2 beside it\n" in result.stdout
    assert "wrote t v2" in result.stdout


def test_full_verify_catches_a_flipped_byte(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from curate.cli import main

    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(50))
    recipe = write_recipe(tmp_path)
    v1 = curate.prepare(recipe)
    writable(v1.path)
    shard = v1.shard_paths[0]
    flip_byte(shard)
    sealed(v1.path)
    same = curate.prepare(recipe)  # the cheap check sees the same size: by design
    assert same.path == v1.path and same.up_to_date
    assert curate.prepare(recipe, verify="full").path == v1.path.parent / "v2"
    rel = shard.relative_to(v1.path)
    v2 = curate.open(v1.path.parent)
    assert v2.name == "v2"
    assert curate.run(recipe, verify="full").path == v2.path  # intact: found, not rebuilt
    # the same through the CLI flag, on a fresh damaged copy of the fingerprint's version
    writable(v2.path)
    flip_byte(v2.path / rel, at=0)
    sealed(v2.path)
    result = CliRunner().invoke(main, ["run", "--quiet", "--verify", "full", str(recipe)])
    assert result.exit_code == 0, result.output
    assert f"v2 is damaged ({rel}: sha256 differs" in result.stdout
    assert "wrote t v3" in result.stdout
    try:
        curate.prepare(recipe, verify="everything")  # type: ignore[arg-type]
    except curate.CurateError as exc:
        assert "verify='everything'" in str(exc)
    else:
        raise AssertionError("an unknown verify mode was accepted")


def test_concurrent_callers_on_a_damaged_version_get_one_new_version(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(3000))
    recipe = str(write_recipe(tmp_path))
    v1 = curate.prepare(recipe)
    writable(v1.path)
    (v1.path / v1.manifest["shards"][0]["path"]).unlink()
    sealed(v1.path)
    results = _prepare_at_once(recipe)
    assert {path for path, _ in results} == {str(v1.path.parent / "v2")}
    assert sum(1 for _, up_to_date in results if not up_to_date) == 1  # one rank built it
    names = sorted(p.name for p in v1.path.parent.iterdir() if p.name.startswith("v"))
    assert names == ["v1", "v2"]


def _thousand_shards(tmp_path: Path) -> tuple[Path, curate.Version]:
    """A valid 1,000-shard version, made cheaply: one built shard hard-linked 1,000 times."""
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(20))
    recipe = write_recipe(tmp_path)
    v1 = curate.prepare(recipe)
    writable(v1.path)
    manifest = json.loads((v1.path / "manifest.json").read_text())
    first = manifest["shards"][0]
    records = [first]
    for i in range(1, 1000):
        path = f"shards/part-00000-{i:05d}.arrow"
        os.link(v1.path / first["path"], v1.path / path)
        records.append({**first, "path": path})
    manifest["shards"] = records
    (v1.path / "manifest.json").write_text(json.dumps(manifest, indent=2))
    sealed(v1.path)
    return recipe, v1


def test_noop_prepare_of_1000_shards_stats_each_within_50_ms(tmp_path: Path) -> None:
    recipe, v1 = _thousand_shards(tmp_path)
    times = []
    for _ in range(7):  # the best of several: the machine is shared, the bound is not
        started = time.perf_counter()
        v = curate.prepare(recipe)
        times.append(time.perf_counter() - started)
        assert v.path == v1.path and v.up_to_date
    assert min(times) <= 0.050, times
    writable(v1.path)
    (v1.path / "shards" / "part-00000-00999.arrow").unlink()  # the last of them is checked too
    sealed(v1.path)
    v2 = curate.prepare(recipe)
    assert v2.rebuilt_because == "v1 is damaged (shards/part-00000-00999.arrow: missing)"

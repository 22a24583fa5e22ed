"""A published version reads back zero-copy with datasets, pyarrow and polars, and stays unchanged."""

from __future__ import annotations

import hashlib
from pathlib import Path

import datasets
import polars as pl
import pyarrow as pa
import pytest
from conftest import writable, write_recipe

import curate


@pytest.fixture
def version(project: Path) -> curate.Version:
    recipe = write_recipe(
        project,
        fields={"source": "string"},
        output={"root": "out", "fsync": False, "shard_size": 600},
    )
    # a metadata field that only some records have
    return curate.run(recipe)


def snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_datasets_load_from_disk_reads_every_row(version: curate.Version) -> None:
    assert len(version.manifest["shards"]) > 1  # small shard_size: several shards
    whole = datasets.load_from_disk(str(version.path))  # every version is a DatasetDict
    assert isinstance(whole, datasets.DatasetDict) and list(whole) == ["train"]
    ds = whole["train"]  # a version without splits: its one split (curate.hf_layout)
    assert ds.num_rows == version.counts["written"] == 48
    assert ds.column_names == ["id", "text", "source"]
    assert ds.features["text"] == datasets.Value("string")
    first = datasets.Dataset.from_file(str(version.shard_paths[0]))
    assert first.num_rows == version.manifest["shards"][0]["rows"]


def test_pyarrow_and_polars_readers(version: curate.Version) -> None:
    table = version.to_arrow()
    assert table.num_rows == 48
    assert table.schema.field("text").type == pa.string()
    frame = version.to_polars()
    assert isinstance(frame, pl.DataFrame) and frame.height == 48
    assert frame["id"].to_list() == table.column("id").to_pylist()
    streamed = pl.concat([pl.read_ipc_stream(p) for p in version.shard_paths])
    assert streamed["text"].to_list() == table.column("text").to_pylist()


def test_to_dataset_map_never_writes_into_the_version(version: curate.Version) -> None:
    before = snapshot(version.path)
    ds = version.to_dataset()
    mapped = ds.map(lambda r: {"n": len(r["text"])})
    assert mapped.num_rows == 48 and mapped.cache_files
    assert all(str(version.path) not in f["filename"] for f in mapped.cache_files)
    assert snapshot(version.path) == before


def test_shards_are_ipc_streams_with_one_schema(version: curate.Version) -> None:
    schemas = set()
    for path in version.shard_paths:
        with pa.memory_map(str(path)) as source:
            schemas.add(pa.ipc.open_stream(source).schema.to_string())
    assert len(schemas) == 1


def test_repr_and_html(version: curate.Version) -> None:
    assert repr(version).startswith("Version(t v1, 48 documents written of 60 read")
    html = version._repr_html_()
    assert "<table>" in html and "exact_dedup" in html
    assert "<th>changed</th>" in html  # the same columns as `curate show`


def test_html_names_splits_and_tokens(tmp_path: Path) -> None:
    from conftest import corpus, write_jsonl

    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(20, dup_every=0))
    tokenizer = str(Path(__file__).parent.parent / "sample_data" / "tokenizer")
    stages = [{"tokenize": {"source": tokenizer}}]
    version = curate.run(write_recipe(tmp_path, stages=stages, split={"validation": 0.3}))
    splits = version.manifest["splits"]["splits"]
    html = version._repr_html_()
    assert f"{version.manifest['tokens']:,} tokens" in html
    assert f"splits: train {splits['train']['documents']}, validation " in html


def test_empty_side_outputs_have_their_own_schemas(version: curate.Version) -> None:
    from curate.io.batches import QUARANTINE_SCHEMA
    from curate.stages.base import REJECTED_SCHEMA

    assert version.counts["quarantined"] == 0  # no quarantine files: an empty table
    assert version.quarantined().schema == QUARANTINE_SCHEMA
    assert version.rejected().schema == REJECTED_SCHEMA


def test_open_by_dataset_folder_and_by_name(version: curate.Version, project: Path) -> None:
    assert curate.open(project / "out" / "t").path == version.path
    assert curate.open(project / "out" / "t", "v1").path == version.path
    with pytest.raises(curate.CurateError):
        curate.open(project / "out" / "t", "v9")


def test_a_damaged_manifest_is_a_one_line_error(version: curate.Version, tmp_path: Path) -> None:
    import shutil

    from click.testing import CliRunner

    from curate.cli import main

    copy = tmp_path / "copy" / "v1"
    shutil.copytree(version.path, copy)
    copy.chmod(0o750)
    (copy / "manifest.json").chmod(0o640)
    for text, says in (("{cut", "cannot be read"), ("[]", "is not a curate manifest")):
        (copy / "manifest.json").write_text(text)
        result = CliRunner().invoke(main, ["show", str(copy)])
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert result.stderr.startswith(f"error: {copy / 'manifest.json'} {says}")
        assert len(result.stderr.splitlines()) == 1 and "curate verify" in result.stderr


def crafted_copy(original: curate.Version, folder: Path, **changes: object) -> curate.Version:
    """A writable copy of the version whose manifest has `changes` applied."""
    import json
    import shutil

    shutil.copytree(original.path, folder)
    writable(folder)
    m = json.loads((folder / "manifest.json").read_text())
    for key, value in changes.items():
        if key == "first_shard":
            m["shards"][0]["path"] = str(value).format(tmp=folder.parent.parent)
        else:
            m[key] = value
    (folder / "manifest.json").write_text(json.dumps(m))
    return curate.Version(folder)


def everything_outside(folder: Path, cache: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p != cache and not p.is_relative_to(cache)}


@pytest.mark.parametrize(
    "changes",
    [
        {"first_shard": "../../../escape/x.arrow"},
        {"first_shard": "{tmp}/abs-escape/x.arrow"},
        {"dataset": "../../.."},
        {"dataset": "../../escape", "version": "../../escape"},
    ],
    ids=["shard-dotdot", "shard-absolute", "dataset-dotdot", "dataset-and-version"],
)
def test_to_dataset_makes_nothing_outside_its_view(
    version: curate.Version, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changes: dict
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("CURATE_CACHE", str(cache))
    crafted = crafted_copy(version, tmp_path / "crafted" / "v1", **changes)
    before = everything_outside(tmp_path, cache)
    error: Exception | None = None
    try:
        crafted.to_dataset()
    except Exception as exc:  # at the starting commit: whatever following the paths gave
        error = exc
    assert everything_outside(tmp_path, cache) - before == set()
    if "first_shard" in changes:
        assert isinstance(error, curate.CurateError), error
        assert f"{crafted.path / 'manifest.json'}: shards[0].path" in str(error)
        assert "leads outside" in str(error)
    else:  # the names are only labels: the view is made, inside the cache
        assert error is None


def test_two_roots_with_the_same_recipe_have_their_own_views(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CURATE_CACHE", str(project / "cache"))
    a = curate.run(write_recipe(project, output={"root": "a", "fsync": False}))
    b = curate.run(write_recipe(project, output={"root": "b", "fsync": False}))
    assert (a.dataset, a.name, a.fingerprint) == (b.dataset, b.name, b.fingerprint)
    for version in (a, b):
        files = [f["filename"] for f in version.to_dataset().cache_files]
        assert files and all(Path(f).resolve().is_relative_to(version.path) for f in files), files


def test_open_says_what_a_path_is_not(tmp_path: Path) -> None:
    with pytest.raises(curate.CurateError) as exc:
        curate.open(tmp_path / "nowhere")
    assert str(exc.value) == f"{tmp_path / 'nowhere'} does not exist"
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("x")
    with pytest.raises(curate.CurateError) as exc:
        curate.open(tmp_path / "notes")
    assert str(exc.value).startswith(
        f"{tmp_path / 'notes'} is not a version (no manifest.json) nor a curate dataset folder"
    )
    with pytest.raises(curate.CurateError, match="nor a curate dataset folder"):
        curate.open(tmp_path / "notes" / "todo.txt")


COPIES_AT_EXIT = """
import copy, pickle, sys
import curate
kept = []
for _ in range(5):
    v = curate.open(sys.argv[1])
    kept += [v, copy.copy(v), pickle.loads(pickle.dumps(v))]
    cycle = curate.open(sys.argv[1])
    cycle.self = cycle  # freed only by the collector, late at exit
"""


def test_versions_alive_at_exit_print_nothing(version: curate.Version) -> None:
    import subprocess
    import sys

    for _ in range(3):
        result = subprocess.run(
            [sys.executable, "-c", COPIES_AT_EXIT, str(version.path.parent)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert result.returncode == 0 and result.stderr == ""


def test_a_copy_of_a_version_never_closes_another_file(version: curate.Version) -> None:
    import copy
    import gc

    held = curate.open(version.path)
    twin = copy.copy(held)
    held.release()  # its lock's descriptor number is free now ...
    with open(version.path / "manifest.json", "rb") as f:  # ... and likely reused here
        del twin
        gc.collect()
        assert f.read(1) == b"{"


def test_dataset_dict_json_cannot_name_a_split_outside_the_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json
    import shutil

    from click.testing import CliRunner
    from conftest import corpus, write_jsonl

    from curate.cli import main

    monkeypatch.setenv("CURATE_CACHE", str(tmp_path / "cache"))
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(40, dup_every=0))
    version = curate.run(write_recipe(tmp_path, split={"validation": 0.3}))
    copy = crafted_copy(version, tmp_path / "crafted" / "v1")
    # a saved split outside the version, where the view's '../../..' leads
    shutil.copytree(copy.path / "validation", tmp_path / "escape")
    (copy.path / "dataset_dict.json").write_text(
        json.dumps({"splits": ["train", "validation", "../../../escape"]})
    )
    with pytest.raises(curate.CurateError) as exc:
        copy.to_dataset()
    assert str(exc.value).startswith(f"{copy.path / 'dataset_dict.json'}: splits[2] ")
    result = CliRunner().invoke(main, ["verify", str(copy.path)])
    assert result.exit_code == 1 and "dataset_dict.json: names other splits" in result.stderr


@pytest.mark.parametrize("change", ["twice", "extra", "dropped", "outside"])
def test_to_dataset_serves_only_the_manifests_shards(
    version: curate.Version, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    """state.json tells `datasets` which files to load: one listing a shard twice served its
    rows twice (open() and the size check pass), one listing a file the manifest does not
    raised a raw FileNotFoundError from the view; both must be refused by name, as verify does."""
    import json
    import shutil

    monkeypatch.setenv("CURATE_CACHE", str(tmp_path / "cache"))
    crafted = crafted_copy(version, tmp_path / "crafted" / "v1")
    state = crafted.path / "train" / "state.json"
    data = json.loads(state.read_text())
    first = data["_data_files"][0]["filename"]
    assert first.startswith("../shards/")  # named from train/
    if change == "twice":
        data["_data_files"].append({"filename": first})
    elif change == "extra":
        shutil.copy(state.parent / first, crafted.path / "shards" / "extra.arrow")
        data["_data_files"].append({"filename": "../shards/extra.arrow"})
    elif change == "outside":  # '../' leads to the version's shards; '../../' out of it
        shutil.copy(state.parent / first, crafted.path.parent / "outside.arrow")
        data["_data_files"].append({"filename": "../../outside.arrow"})
    else:
        data["_data_files"] = []
    state.write_text(json.dumps(data))
    why = "leads outside" if change == "outside" else "lists other files than the manifest's"
    with pytest.raises(curate.CurateError, match=why):
        curate.Version(crafted.path).to_dataset()


COUNT_MANIFEST_OPENS = """
import os, sys
import curate
opens = []
def hook(event, args):
    if event == "open" and isinstance(args[0], str) and args[0].endswith("manifest.json"):
        opens.append(args[0])
sys.addaudithook(hook)
version = curate.open(sys.argv[1])
assert version.name == "v1" and version.counts["written"] > 0
print(len(opens))
"""


def test_open_reads_the_manifest_once(version: curate.Version) -> None:
    """`curate.open(dataset)` read and parsed the manifest twice: once for LATEST's sealed
    check and again for the Version (a manifest grows with the shard count). Every open of a
    file raises Python's `open` audit event, in a process of its own (hooks stay installed)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", COUNT_MANIFEST_OPENS, str(version.path.parent)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1"]


def test_a_manifest_that_is_a_link_is_not_read_through(
    version: curate.Version, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Opening a version folder read a `manifest.json` that is a symbolic link wherever it
    led; the reader gc and LATEST's check use refuses it, and `curate.open` now uses it too."""
    import shutil

    copy = tmp_path_factory.mktemp("copy") / "v1"
    shutil.copytree(version.path, copy)
    writable(copy)
    (copy / "manifest.json").unlink()
    (copy / "manifest.json").symlink_to(version.path / "manifest.json")
    with pytest.raises(curate.CurateError, match=r"manifest\.json is not a regular file"):
        curate.open(copy)

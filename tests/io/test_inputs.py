"""Discovering inputs: order, names, formats, and every way an input can be wrong up front."""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from curate.errors import CurateError
from curate.io import inputs as inputs_module
from curate.io.inputs import InputFile, discover_inputs, format_of, member_paths


@pytest.fixture(autouse=True)
def _from_the_recipe_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Messages show paths from the current folder: here the user stands where the recipe
    is (tmp_path, the base folder), so they read as the recipe wrote them."""
    monkeypatch.chdir(tmp_path)


def touch(path: Path, data: bytes = b'{"text": "x"}\n') -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def write_hf_folder(folder: Path, shards: list[pa.Table]) -> Path:
    """A save_to_disk-style folder: stream shards listed in state.json."""
    folder.mkdir(parents=True)
    names = []
    for i, table in enumerate(shards):
        name = f"data-{i:05d}-of-{len(shards):05d}.arrow"
        with pa.ipc.new_stream(folder / name, table.schema) as w:
            w.write_table(table)
        names.append(name)
    state = {"_data_files": [{"filename": n} for n in names], "_fingerprint": "x"}
    (folder / "state.json").write_text(json.dumps(state))
    return folder


def names(found: list[InputFile]) -> list[str]:
    return [f.name for f in found]


def test_order_is_recipe_order_then_sorted_path_and_duplicates_appear_once(tmp_path: Path) -> None:
    for n in ("c", "a", "b"):
        touch(tmp_path / "data" / f"{n}.jsonl")
    found = discover_inputs(["data/b.jsonl", "data/*.jsonl", "./data/a.jsonl"], tmp_path)
    assert names(found) == ["data/b.jsonl", "data/a.jsonl", "data/c.jsonl"]
    assert all(os.path.isabs(f.path) and f.format == "jsonl" for f in found)


def test_recursive_glob_and_names_outside_base_stay_relative(tmp_path: Path) -> None:
    touch(tmp_path / "in" / "x" / "y" / "deep.jsonl")
    touch(tmp_path / "in" / "top.jsonl")
    base = tmp_path / "recipes"
    base.mkdir()
    found = discover_inputs(["../in/**/*.jsonl"], base)
    # relative to the recipe's folder, `..` included: ids do not depend on the checkout's place
    assert names(found) == ["../in/top.jsonl", "../in/x/y/deep.jsonl"]
    found = discover_inputs(["in/**/*.jsonl"], tmp_path)
    assert names(found) == ["in/top.jsonl", "in/x/y/deep.jsonl"]


def test_formats_by_extension_and_folder_kind(tmp_path: Path) -> None:
    touch(tmp_path / "a.jsonl")
    touch(tmp_path / "b.ndjson")
    touch(tmp_path / "c.jsonl.gz", gzip.compress(b'{"text": "x"}\n'))
    touch(tmp_path / "d.jsonl.zst", zstandard.ZstdCompressor().compress(b'{"text": "x"}\n'))
    table = pa.table({"text": ["x"]})
    pq.write_table(table, tmp_path / "e.parquet")
    with pa.ipc.new_file(tmp_path / "f.arrow", table.schema) as w:
        w.write_table(table)
    with pa.ipc.new_stream(tmp_path / "g.feather", table.schema) as w:
        w.write_table(table)
    write_hf_folder(tmp_path / "saved", [table, table])
    touch(tmp_path / "notes" / "one.txt", b"hello")
    touch(tmp_path / "notes" / "sub" / "two.MD", b"# hi there")
    patterns = ["a.jsonl", "b.ndjson", "c.jsonl.gz", "d.jsonl.zst", "e.parquet", "f.arrow"]
    patterns += ["g.feather", "saved", "notes"]
    found = discover_inputs(patterns, tmp_path)
    assert [f.format for f in found] == [
        "jsonl",
        "jsonl",
        "jsonl.gz",
        "jsonl.zst",
        "parquet",
        "arrow",
        "arrow",
        "hf_disk",
        "text_folder",
    ]
    notes = found[-1]
    assert notes.size == 5 + 10
    members = [tmp_path / "notes" / "one.txt", tmp_path / "notes" / "sub" / "two.MD"]
    assert notes.mtime_ns == max(p.stat().st_mtime_ns for p in members)
    saved = found[-2]
    listed = [*sorted((tmp_path / "saved").glob("*.arrow")), tmp_path / "saved" / "state.json"]
    assert saved.size == sum(p.stat().st_size for p in listed)


def test_format_of_is_case_insensitive_and_rejects_others() -> None:
    assert format_of("X.JSONL.GZ") == "jsonl.gz"
    assert (format_of("a.CSV"), format_of("a.tsv"), format_of("a.Md")) == (
        "csv",
        "tsv",
        "text_file",
    )
    assert format_of("x.json") == "json"
    assert format_of("x.gz") is None


def test_missing_path_names_pattern_and_resolved_path(tmp_path: Path) -> None:
    with pytest.raises(CurateError, match=r"input 'data/none\.jsonl' does not exist \(resolved to"):
        discover_inputs(["data/none.jsonl"], tmp_path)


def test_glob_matching_nothing_fails_naming_pattern_and_base(tmp_path: Path) -> None:
    with pytest.raises(CurateError) as exc:
        discover_inputs(["data/*.jsonl"], tmp_path)
    assert str(exc.value) == f"input 'data/*.jsonl' matched no files (resolved against {tmp_path})"


def test_glob_matching_only_folders_says_so(tmp_path: Path) -> None:
    touch(tmp_path / "corpora" / "one" / "a.txt", b"text")
    with pytest.raises(CurateError, match=re.escape("only folders")):
        discover_inputs(["corpora/*"], tmp_path)


def test_literal_name_with_brackets_is_not_a_glob(tmp_path: Path) -> None:
    touch(tmp_path / "web[1].jsonl")
    assert names(discover_inputs(["web[1].jsonl"], tmp_path)) == ["web[1].jsonl"]


def test_unsupported_extension_lists_supported(tmp_path: Path) -> None:
    touch(tmp_path / "data" / "a.jsonl")
    touch(tmp_path / "data" / "b.xml", b"<a/>\n")
    with pytest.raises(CurateError) as exc:
        discover_inputs(["data/*"], tmp_path)
    message = str(exc.value)
    assert "'data/b.xml' (from 'data/*') has an unsupported extension" in message
    assert ".jsonl.zst" in message and ".parquet" in message and "save_to_disk" in message


def test_text_folder_without_text_files_fails(tmp_path: Path) -> None:
    touch(tmp_path / "empty" / "readme.rst", b"x")
    touch(tmp_path / "empty" / ".hidden.txt", b"x")
    with pytest.raises(
        CurateError, match=re.escape("'empty' is a folder with no .txt or .md files")
    ):
        discover_inputs(["empty"], tmp_path)


def test_a_folder_of_data_files_says_how_to_name_them(tmp_path: Path) -> None:
    touch(tmp_path / "dump" / "b.jsonl.gz", gzip.compress(b'{"text": "x"}\n'))
    touch(tmp_path / "dump" / "a.txt.bak", b"x")
    with pytest.raises(CurateError) as exc:
        discover_inputs(["dump"], tmp_path)
    assert str(exc.value).endswith(
        "it holds data files: name them with a glob, e.g. 'dump/*.jsonl.gz'"
    )
    saved = write_hf_folder(tmp_path / "saved", [pa.table({"text": ["a"]})])
    (saved / "shards").mkdir()
    (saved / "data-00000-of-00001.arrow").rename(saved / "shards" / "data-00000-of-00001.arrow")
    with pytest.raises(CurateError) as exc:
        discover_inputs(["saved/shards"], tmp_path)
    assert str(exc.value).endswith(
        "it holds a saved dataset's shards: name the dataset folder, 'saved'"
    )


def test_unreadable_file_fails_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    touch(tmp_path / "a.jsonl")
    real_open = open

    def deny(path: object, *args: object, **kwargs: object) -> object:
        if str(path).endswith("a.jsonl"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(inputs_module, "open", deny, raising=False)
    with pytest.raises(
        CurateError, match=re.escape("input 'a.jsonl' cannot be read: Permission denied")
    ):
        discover_inputs(["a.jsonl"], tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads everything")
def test_unreadable_file_by_permissions(tmp_path: Path) -> None:
    path = touch(tmp_path / "a.jsonl")
    path.chmod(0)
    try:
        with pytest.raises(CurateError, match=re.escape("cannot be read")):
            discover_inputs(["a.jsonl"], tmp_path)
    finally:
        path.chmod(0o644)


def test_unreadable_text_folder_member_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    touch(tmp_path / "notes" / "a.txt", b"fine")
    touch(tmp_path / "notes" / "b.txt", b"locked")
    real = os.open

    def deny(path: str, *args: int) -> int:
        if str(path).endswith("b.txt"):
            raise PermissionError(13, "Permission denied", path)
        return real(path, *args)

    monkeypatch.setattr(inputs_module.os, "open", deny)
    with pytest.raises(
        CurateError, match=re.escape("file 'b.txt' of input 'notes' cannot be read")
    ):
        discover_inputs(["notes"], tmp_path)


def test_broken_link_fails(tmp_path: Path) -> None:
    (tmp_path / "gone.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    with pytest.raises(CurateError, match=re.escape("link to a file that does not exist")):
        discover_inputs(["*.jsonl"], tmp_path)


def test_compressed_file_without_signature_fails(tmp_path: Path) -> None:
    touch(tmp_path / "a.jsonl.gz", b'{"text": "not compressed"}\n')
    touch(tmp_path / "b.jsonl.zst", b'{"text": "not compressed"}\n')
    touch(tmp_path / "c.jsonl.gz", b"")
    with pytest.raises(CurateError, match=re.escape("'a.jsonl.gz' is not gzip-compressed")):
        discover_inputs(["a.jsonl.gz"], tmp_path)
    with pytest.raises(CurateError, match=re.escape("'b.jsonl.zst' is not zstd-compressed")):
        discover_inputs(["b.jsonl.zst"], tmp_path)
    with pytest.raises(CurateError, match=re.escape("'c.jsonl.gz' is empty")):
        discover_inputs(["c.jsonl.gz"], tmp_path)


def test_truncated_parquet_and_arrow_files_fail(tmp_path: Path) -> None:
    table = pa.table({"text": ["x" * 100] * 10})
    pq.write_table(table, tmp_path / "whole.parquet")
    blob = (tmp_path / "whole.parquet").read_bytes()
    touch(tmp_path / "cut.parquet", blob[: len(blob) // 2])
    with pytest.raises(
        CurateError, match=re.escape("'cut.parquet' is not a complete Parquet file")
    ):
        discover_inputs(["cut.parquet"], tmp_path)
    with pa.ipc.new_file(tmp_path / "whole.arrow", table.schema) as w:
        w.write_table(table)
    blob = (tmp_path / "whole.arrow").read_bytes()
    touch(tmp_path / "cut.arrow", blob[: len(blob) // 2])
    with pytest.raises(CurateError, match=re.escape("'cut.arrow' is a truncated Arrow IPC file")):
        discover_inputs(["cut.arrow"], tmp_path)
    touch(tmp_path / "junk.arrow", b"this is not arrow at all")
    with pytest.raises(CurateError, match=re.escape("'junk.arrow' is not a readable Arrow IPC")):
        discover_inputs(["junk.arrow"], tmp_path)


def test_saved_dataset_problems(tmp_path: Path) -> None:
    touch(tmp_path / "dd" / "dataset_dict.json", b'{"splits": ["train"]}')
    with pytest.raises(
        CurateError, match=r"saved DatasetDict; name one split's folder, e.g. 'dd/train'"
    ):
        discover_inputs(["dd"], tmp_path)
    folder = write_hf_folder(tmp_path / "hf", [pa.table({"text": ["a"]})])
    (folder / "data-00000-of-00001.arrow").unlink()
    with pytest.raises(CurateError, match=r"data-00000-of-00001.arrow .* does not exist"):
        discover_inputs(["hf"], tmp_path)
    touch(tmp_path / "bad" / "state.json", b"{not json")
    with pytest.raises(CurateError, match=re.escape("is not a datasets state.json")):
        discover_inputs(["bad"], tmp_path)


def test_saved_dataset_identity_ignores_cache_files(tmp_path: Path) -> None:
    folder = write_hf_folder(tmp_path / "hf", [pa.table({"text": ["a", "b"]})])
    before = discover_inputs(["hf"], tmp_path)[0]
    touch(folder / "cache-123.arrow", b"x" * 100)
    assert discover_inputs(["hf"], tmp_path)[0] == before


def test_no_patterns_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CurateError, match=re.escape("names no inputs")):
        discover_inputs([], tmp_path)


def test_glob_characters_in_the_base_folder_are_literal(tmp_path: Path) -> None:
    base = tmp_path / "runs [2024]"
    touch(base / "data" / "a.jsonl")
    assert names(discover_inputs(["data/*.jsonl"], base)) == ["data/a.jsonl"]


def test_member_paths_are_what_is_read(tmp_path: Path) -> None:
    touch(tmp_path / "notes" / "b.txt", b"b")
    touch(tmp_path / "notes" / "a" / "c.md", b"c")
    touch(tmp_path / "notes" / "skip.rst", b"x")
    write_hf_folder(tmp_path / "hf", [pa.table({"text": ["a"]})])
    touch(tmp_path / "hf" / "cache-1.arrow", b"x")
    touch(tmp_path / "x.jsonl")
    found = discover_inputs(["notes", "hf", "x.jsonl"], tmp_path)
    assert [member_paths(f) for f in found] == [
        [str(tmp_path / "notes" / "a" / "c.md"), str(tmp_path / "notes" / "b.txt")],
        [str(tmp_path / "hf" / "data-00000-of-00001.arrow"), str(tmp_path / "hf" / "state.json")],
        [str(tmp_path / "x.jsonl")],
    ]


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink"])
def test_a_saved_dataset_reads_nothing_outside_its_folder(tmp_path: Path, how: str) -> None:
    # Another user's dataset (a curate version on a shared root) used as an input must not
    # make this run read files beside it that its owner could not read.
    folder = write_hf_folder(tmp_path / "theirs" / "v1", [pa.table({"text": ["public"]})])
    secret = write_hf_folder(tmp_path / "mine", [pa.table({"text": ["private"]})])
    target = secret / "data-00000-of-00001.arrow"
    state = json.loads((folder / "state.json").read_text())
    if how == "symlink":
        (folder / "data-00000-of-00001.arrow").unlink()
        (folder / "data-00000-of-00001.arrow").symlink_to(target)
    else:
        named = os.path.relpath(target, folder) if how == "dotdot" else str(target)
        state["_data_files"].append({"filename": named})
    (folder / "state.json").write_text(json.dumps(state))
    with pytest.raises(CurateError) as exc:
        discover_inputs(["theirs/v1"], tmp_path)
    message = str(exc.value)
    assert message.startswith(f"{folder / 'state.json'}: _data_files[")
    assert "leads outside" in message


def test_a_dataset_folder_hint_does_not_follow_a_crafted_latest(tmp_path: Path) -> None:
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "dataset_dict.json").write_text("{}")
    touch(tmp_path / "out" / "t" / "LATEST", b"../../secret\n")
    with pytest.raises(CurateError) as exc:
        discover_inputs(["out/t"], tmp_path)
    assert "secret" not in str(exc.value)
    assert "is a curate dataset folder; name one of its versions" in str(exc.value)

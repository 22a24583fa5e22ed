"""Bad records are quarantined and counted (or stop the run), and nothing is lost silently."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from click.testing import CliRunner
from conftest import corpus, write_jsonl, write_recipe

import curate
from curate.cli import main


def hostile(folder: Path) -> None:
    good = corpus(10, dup_every=0)
    lines = [json.dumps(r) for r in good]
    lines.insert(3, '{"id": "cut", "text": "unterminated')
    lines.insert(6, '{"id": "num", "text": 42}')
    lines.insert(8, '{"id": "none"}')
    data = ("\n".join(lines) + "\n").encode()
    data += b'{"id": "bytes", "text": "caf\xe9"}\n'
    (folder / "data").mkdir(parents=True, exist_ok=True)
    (folder / "data" / "a.jsonl").write_bytes(data)


def test_bad_records_are_quarantined_and_reconciled(tmp_path: Path) -> None:
    hostile(tmp_path)
    version = curate.run(write_recipe(tmp_path))
    c = version.counts
    assert c["quarantined"] == 4 and c["documents"] == 10
    assert c["read"] == c["written"] + c["removed_total"] + c["quarantined"]
    q = version.quarantined()
    assert q.num_rows == 4
    assert sorted(q.column("line").to_pylist()) == [4, 7, 9, 14]
    assert set(q.column("file").to_pylist()) == {"data/a.jsonl"}
    # the quarantine never holds the records' content
    blob = b"".join(p.read_bytes() for p in (version.path / "quarantine").iterdir())
    assert b"unterminated" not in blob and b"caf" not in blob
    assert version.manifest["inputs"][0]["quarantined"] == 4


def test_on_error_fail_names_file_and_line_and_writes_nothing(tmp_path: Path) -> None:
    hostile(tmp_path)
    recipe = write_recipe(tmp_path, on_error="fail")
    result = CliRunner().invoke(main, ["run", str(recipe)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "data/a.jsonl:4:" in lines[0] and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()  # the run made the output root: it is removed


def test_truncated_gzip_keeps_readable_records_and_counts_the_tail(tmp_path: Path) -> None:
    payload = "".join(json.dumps(r) + "\n" for r in corpus(200, dup_every=0)).encode()
    blob = gzip.compress(payload)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.jsonl.gz").write_bytes(blob[: len(blob) * 2 // 3])
    version = curate.run(write_recipe(tmp_path, inputs=["data/*.jsonl.gz"], stages=[]))
    c = version.counts
    assert 0 < c["written"] < 200 and c["quarantined"] == 1
    reason = version.quarantined().column("reason")[0].as_py()
    assert "truncated" in reason


def test_quarantine_side_output_reads_back(tmp_path: Path) -> None:
    hostile(tmp_path)
    version = curate.run(write_recipe(tmp_path))
    for f in version.manifest["quarantine"]:
        table = pa.ipc.open_stream(version.path / f["path"]).read_all()
        assert table.column_names == ["file", "line", "reason", "bytes", "offset"]


def test_text_folder_and_parent_versions(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "data" / "a.jsonl", corpus(10, dup_every=0))
    first = curate.run(write_recipe(tmp_path))
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "x.md").write_text("# A note\n\nwith some words in it\n")
    recipe = write_recipe(tmp_path, name="second", inputs=[str(first.path), "notes"])
    second = curate.run(recipe)
    assert second.counts["written"] == 11
    assert second.manifest["parents"] == [f"t/v1@{first.fingerprint}"]


def test_non_unique_ids_stop_the_run_instead_of_dropping_the_wrong_document(tmp_path: Path) -> None:
    write_jsonl(
        tmp_path / "data" / "a.jsonl",
        [{"id": "x", "text": "first"}, {"id": "y", "text": "first"}, {"id": "y", "text": "other"}],
    )
    result = CliRunner().invoke(main, ["run", str(write_recipe(tmp_path))])
    assert result.exit_code == 2
    assert "document id 'y' is not unique" in result.stderr


def split_input(folder: Path, kind: str, bad_at: int, n: int = 3000) -> bytes:
    """data/a.jsonl of n records of `kind` (text or chat) without ids, line bad_at + 1 cut
    short; about 300 KB, so that partitions of 100 KB make three or more of it."""
    records: list[bytes] = []
    for i in range(n):
        if kind == "text":
            record: dict[str, object] = {"text": f"document {i} " + "word " * 15}
        else:
            record = {"messages": [{"role": "user", "content": f"question {i} " + "w " * 20},
                                   {"role": "assistant", "content": f"answer {i}"}]}  # fmt: skip
        records.append(json.dumps(record).encode())
    records[bad_at] = records[bad_at][:25]
    data = b"\n".join(records) + b"\n"
    (folder / "data").mkdir(parents=True, exist_ok=True)
    (folder / "data" / "a.jsonl").write_bytes(data)
    return data


@pytest.mark.parametrize("kind", ["text", "chat"])
def test_a_bad_line_in_a_later_partition_is_named_by_its_true_line_and_offset(
    tmp_path: Path, kind: str
) -> None:
    """Partitions are planned without counting lines; a partition with a bad line counts the
    lines before it when it quarantines it, in the worker, and names its offset too."""
    data = split_input(tmp_path, kind, bad_at=2500)
    chat = {"chat": {"shape": "auto"}} if kind == "chat" else {}
    recipe = write_recipe(tmp_path, id_field=None, stages=[], partition_size="100KB",
                          engine={"workers": 2}, **chat)  # fmt: skip
    version = curate.run(recipe)
    assert version.manifest["inputs"][0]["partitions"] >= 3
    at = sum(len(line) + 1 for line in data.splitlines()[:2500])
    [row] = version.quarantined().to_pylist()
    assert (row["file"], row["line"], row["offset"]) == ("data/a.jsonl", 2501, at)
    assert version.counts["written"] == 2999
    cfg = yaml.safe_load(recipe.read_text())
    recipe.write_text(yaml.safe_dump({**cfg, "on_error": "fail"}))
    result = CliRunner().invoke(main, ["run", str(recipe)])
    assert result.exit_code == 2 and "data/a.jsonl:2501: " in result.stderr


def test_derived_ids_do_not_change_when_the_file_is_touched_or_split_otherwise(
    tmp_path: Path,
) -> None:
    """Ids of plain JSONL records without an id are where their lines start, whatever the
    partitions: the same for a file under or over partition_size, and after a touch."""
    data = split_input(tmp_path, "text", bad_at=10)
    ids = []
    for size, touch in [("100MB", False), ("50KB", False), ("70KB", True)]:
        if touch:
            stat = (tmp_path / "data" / "a.jsonl").stat()
            os.utime(tmp_path / "data" / "a.jsonl", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
        version = curate.run(write_recipe(tmp_path, id_field=None, stages=[], partition_size=size))
        ids.append(version.to_arrow()["id"].to_pylist())
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    assert ids[0] == [f"data/a.jsonl@{at}" for i, at in enumerate(starts[:-1]) if i != 10]
    assert ids[1] == ids[0] and ids[2] == ids[0]

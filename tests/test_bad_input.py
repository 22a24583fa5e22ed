"""Bad records are quarantined and counted (or stop the run), and nothing is lost silently."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
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
        assert table.column_names == ["file", "line", "reason", "bytes"]


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

"""A single .txt/.md file named as an input: one document, its id the input's name, under
the same rules as a text folder's files (BOM dropped, invalid UTF-8 quarantined, a file
over max_document_bytes set aside unread)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import datasets
import pytest
from conftest import write_recipe

import curate
from curate.errors import CurateError
from curate.io.batches import FieldSpec, QuarantineRecord
from curate.io.inputs import discover_inputs
from curate.io.partitions import plan_partitions
from curate.reading import read_partition

PLAIN = FieldSpec()


def read(
    root: Path, patterns: list[str], fields: FieldSpec = PLAIN, **kw: object
) -> tuple[list[dict], list[QuarantineRecord]]:
    parts = plan_partitions(discover_inputs(patterns, root), 10)  # tiny target: still one each
    rows: list[dict] = []
    bad: list[QuarantineRecord] = []
    for part in parts:
        for chunk in read_partition(part, fields, **kw):  # type: ignore[arg-type]
            assert chunk.batch.schema == fields.schema()
            rows += chunk.batch.to_pylist()
            bad += chunk.quarantined
    return rows, bad


def test_a_text_file_is_one_document_named_by_its_input(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_bytes(b"\xef\xbb\xbf# Guide\r\n\r\nline two\n" * 50)
    (tmp_path / "README.TXT").write_bytes("caf\u00e9 \u20ac".encode())
    found = discover_inputs(["docs/guide.md", "*.TXT"], tmp_path)
    assert [f.format for f in found] == ["text_file", "text_file"]
    parts = plan_partitions(found, 10)
    assert [(p.start, p.stop) for p in parts] == [(0, found[0].size), (0, found[1].size)]
    rows, bad = read(tmp_path, ["docs/guide.md", "*.TXT"], FieldSpec("body", "doc_id"))
    # the BOM at the start goes, the ones after it are text; line endings are left as they are
    assert rows == [
        {
            "id": "docs/guide.md",
            "text": "# Guide\r\n\r\nline two\n" + "\ufeff# Guide\r\n\r\nline two\n" * 49,
        },
        {"id": "README.TXT", "text": "caf\u00e9 \u20ac"},
    ]
    assert bad == []


def test_empty_invalid_utf8_and_nul_bytes(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "bad.txt").write_bytes(b"ok so far \xff then not")
    (tmp_path / "nul.md").write_bytes(b"a\x00b")
    rows, bad = read(tmp_path, ["empty.txt", "bad.txt", "nul.md"])
    assert rows == [{"id": "empty.txt", "text": ""}, {"id": "nul.md", "text": "a\x00b"}]
    assert [(q.file, q.line, q.reason, q.nbytes) for q in bad] == [
        ("bad.txt", None, "invalid UTF-8 at byte 10 of the file", 20)
    ]
    with pytest.raises(CurateError, match=r"^bad\.txt: invalid UTF-8 at byte 10"):
        read(tmp_path, ["bad.txt"], on_error="fail")


def test_a_file_over_max_document_bytes_is_set_aside_by_its_size(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_bytes(b"\xef\xbb\xbf" + b"x" * 101)
    rows, bad = read(tmp_path, ["big.txt"], max_document_bytes=100)
    assert rows == []
    assert [(q.file, q.line, q.nbytes) for q in bad] == [("big.txt", None, 101)]
    assert bad[0].reason.startswith("document_too_large")
    rows, bad = read(tmp_path, ["big.txt"], max_document_bytes=101)
    assert [len(r["text"]) for r in rows] == [101] and bad == []


def test_a_file_changed_after_discovery_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("first version")
    [part] = plan_partitions(discover_inputs(["a.txt"], tmp_path), 10**9)
    (tmp_path / "a.txt").write_text("rewritten mid-run, a different length")
    with pytest.raises(CurateError, match=re.escape("changed while the run read it")):
        list(read_partition(part, FieldSpec()))


@pytest.mark.timeout(600)
def test_a_text_file_beside_jsonl_end_to_end_read_back_with_datasets(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.jsonl").write_text('{"id": "j1", "text": "a record with words"}\n')
    (tmp_path / "data" / "notes.md").write_text("# Notes\n\nsome words of a note\n")
    with open(tmp_path / "data" / "huge.txt", "wb") as f:  # sparse: 2 MB nobody stored
        f.seek(2 << 20)
        f.write(b"\n")
    (tmp_path / "data" / "latin1.txt").write_bytes(b"caf\xe9")
    recipe = write_recipe(tmp_path, inputs=["data/*"], max_document_bytes="1MB")
    version = curate.run(recipe)
    ds = datasets.load_from_disk(str(version.path))["train"]  # a version without splits
    assert sorted(zip(ds["id"], ds["text"], strict=True)) == [
        ("data/notes.md", "# Notes\n\nsome words of a note"),  # normalize trims
        ("j1", "a record with words"),
    ]
    quarantined = sorted(
        (r["file"], r["reason"].split(":")[0]) for r in version.quarantined().to_pylist()
    )
    assert quarantined == [
        ("data/huge.txt", "document_too_large"),
        ("data/latin1.txt", "invalid UTF-8 at byte 3 of the file"),
    ]
    c = version.counts
    assert c["read"] == c["written"] + c["removed_total"] + c["quarantined"] == 4
    docs = {i["name"]: (i["documents"], i["quarantined"]) for i in version.manifest["inputs"]}
    assert docs == {"data/a.jsonl": (1, 0), "data/huge.txt": (0, 1),
                    "data/latin1.txt": (0, 1), "data/notes.md": (1, 0)}  # fmt: skip
    assert os.path.getsize(tmp_path / "data" / "huge.txt") > 2 << 20

"""Reading a folder of .txt/.md files, one document each."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pyarrow as pa
import pytest

from curate.errors import CurateError
from curate.io import folders
from curate.io.batches import FieldSpec, QuarantineRecord
from curate.io.inputs import discover_inputs
from curate.io.partitions import plan_partitions
from curate.reading import read_partition


def make_notes(root: Path) -> Path:
    notes = root / "notes"
    files = {
        "b.txt": b"second file\r\nwith CRLF\r\n",
        "a.md": b"\xef\xbb\xbf# first, after a BOM\n",
        "sub/c.txt": "caf\u00e9 \u20ac".encode(),
        "sub/bad.txt": b"ok so far \xff then not",
        "empty.txt": b"",
        "ignored.rst": b"not a text file by extension",
        ".hidden.txt": b"editor backup",
        ".git/x.txt": b"not part of the corpus",
    }
    for rel, data in files.items():
        path = notes / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return notes


def read(
    root: Path, fields: FieldSpec, target: int = 10**9, **kw: object
) -> tuple[list[dict], list[QuarantineRecord]]:
    parts = plan_partitions(discover_inputs(["notes"], root), target)
    rows: list[dict] = []
    bad: list[QuarantineRecord] = []
    for part in parts:
        for chunk in read_partition(part, fields, **kw):  # type: ignore[arg-type]
            assert chunk.batch.schema == fields.schema()
            rows += chunk.batch.to_pylist()
            bad += chunk.quarantined
    return rows, bad


def test_one_document_per_file_sorted_with_path_ids(tmp_path: Path) -> None:
    make_notes(tmp_path)
    rows, bad = read(tmp_path, FieldSpec("body", "doc_id", {"lang": pa.string()}))
    assert rows == [
        {"id": "notes/a.md", "text": "# first, after a BOM\n", "lang": None},
        {"id": "notes/b.txt", "text": "second file\r\nwith CRLF\r\n", "lang": None},
        {"id": "notes/empty.txt", "text": "", "lang": None},
        {"id": "notes/sub/c.txt", "text": "caf\u00e9 \u20ac", "lang": None},
    ]
    assert [(q.file, q.line, q.reason, q.nbytes) for q in bad] == [
        ("notes/sub/bad.txt", None, "invalid UTF-8 at byte 10 of the file", 20)
    ]


def test_on_error_fail_names_the_file(tmp_path: Path) -> None:
    make_notes(tmp_path)
    with pytest.raises(CurateError, match=r"^notes/sub/bad\.txt: invalid UTF-8 at byte 10"):
        read(tmp_path, FieldSpec(), on_error="fail")


def test_partitions_and_small_batches_keep_the_order(tmp_path: Path) -> None:
    make_notes(tmp_path)
    whole, _ = read(tmp_path, FieldSpec())
    split, _ = read(tmp_path, FieldSpec(), target=10, batch_bytes=5)
    assert split == whole


def test_folder_changed_after_discovery_is_an_error(tmp_path: Path) -> None:
    notes = make_notes(tmp_path)
    parts = plan_partitions(discover_inputs(["notes"], tmp_path), 10**9)
    (notes / "b.txt").write_text("rewritten mid-run, a different length")
    with pytest.raises(
        CurateError, match=re.escape("notes/b.txt changed while curate was running")
    ):
        list(read_partition(parts[0], FieldSpec()))
    # a worker process lists the folder afresh and sees any change at all
    folders._cached_members.cache_clear()
    with pytest.raises(CurateError, match="'notes' changed while curate was running"):
        list(read_partition(parts[0], FieldSpec()))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads everything")
def test_unreadable_subfolder_is_an_error_not_a_smaller_dataset(tmp_path: Path) -> None:
    notes = make_notes(tmp_path)
    (notes / "sub").chmod(0)
    try:
        with pytest.raises(CurateError, match="cannot be read"):
            discover_inputs(["notes"], tmp_path)
    finally:
        (notes / "sub").chmod(0o755)

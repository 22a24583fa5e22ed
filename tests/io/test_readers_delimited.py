""".csv/.tsv inputs: the recipe's fields name header columns, every cell is read as a string
(kept fields cast row by row), rows numbered as records (`name:row`), bad rows quarantined
by their number, hostile files ending in their documented outcome."""

from __future__ import annotations

import os
from pathlib import Path

import datasets
import pyarrow as pa
import pytest
import yaml
from conftest import write_recipe
from test_hostile_inputs import cli_peak_rss

import curate
from curate.errors import CurateError
from curate.io.batches import FieldSpec, QuarantineRecord
from curate.io.inputs import discover_inputs
from curate.io.partitions import plan_partitions
from curate.reading import read_partition

PLAIN = FieldSpec()


def read(
    root: Path, name: str, data: bytes, fields: FieldSpec = PLAIN, **kw: object
) -> tuple[list[dict], list[tuple[int | None, str, int]]]:
    (root / name).write_bytes(data)
    parts = plan_partitions(discover_inputs([name], root), 16)
    assert len(parts) == 1  # a CSV file is one partition, whatever the target size
    rows: list[dict] = []
    bad: list[QuarantineRecord] = []
    for chunk in read_partition(parts[0], fields, **kw):  # type: ignore[arg-type]
        assert chunk.batch.schema == fields.schema()
        rows += chunk.batch.to_pylist()
        bad += chunk.quarantined
    return rows, [(q.line, q.reason, q.nbytes) for q in bad]


def test_rows_with_quoted_newlines_typed_fields_and_derived_ids(tmp_path: Path) -> None:
    data = (
        b"\xef\xbb\xbfid,body,stars,lang,ignored\n"
        b'a1,"first line\nsecond line, with a comma",5,en,x\n'
        b'a2,"said ""hi""",,fr,y\n'
        b"a3,NA,007,,z\n"
    )
    fields = FieldSpec("body", None, {"stars": pa.int64(), "lang": pa.string()})
    rows, bad = read(tmp_path, "a.csv", data, fields)
    assert rows == [
        {
            "id": "a.csv:0",
            "text": "first line\nsecond line, with a comma",
            "stars": 5,
            "lang": "en",
        },
        {"id": "a.csv:1", "text": 'said "hi"', "stars": None, "lang": "fr"},  # empty cell: null
        {"id": "a.csv:2", "text": "NA", "stars": 7, "lang": ""},  # strings stay strings
    ]
    assert bad == []
    rows, _ = read(tmp_path, "a.csv", data, FieldSpec("body", "id"))
    assert [r["id"] for r in rows] == ["a1", "a2", "a3"]


def test_tsv_reads_tabs(tmp_path: Path) -> None:
    rows, bad = read(tmp_path, "a.tsv", b'text\tn\nhello, world\t1\n"a\ttab"\t2\n')
    assert [r["text"] for r in rows] == ["hello, world", "a\ttab"] and bad == []


def test_ragged_rows_and_bad_cells_are_quarantined_and_keep_their_numbers(tmp_path: Path) -> None:
    data = (
        b"id,text,n\n"
        b"0,good zero,1\n"
        b"1,too few\n"
        b"2,too,many,cells\n"
        b"3,caf\xe9,1\n"  # invalid UTF-8
        b"4,good four,x\n"  # not an int64
        b"\n"  # blank lines are no rows
        b"5,a\x00b,2\n"  # a NUL byte is a character of the text
    )
    fields = FieldSpec("text", None, {"n": pa.int64()})
    rows, bad = read(tmp_path, "a.csv", data, fields)
    assert rows == [
        {"id": "a.csv:0", "text": "good zero", "n": 1},
        {"id": "a.csv:5", "text": "a\x00b", "n": 2},
    ]
    assert bad == [
        (2, "row has 2 cells, not the header's 3", len("1,too few")),
        (3, "row has 4 cells, not the header's 3", len("2,too,many,cells")),
        (4, "text field 'text' is not valid UTF-8", 0),
        (5, "field 'n' cannot be read as int64", 0),
    ]
    with pytest.raises(CurateError, match=r"^a\.csv:2: row has 2 cells"):
        read(tmp_path, "a.csv", data, fields, on_error="fail")


def test_an_unterminated_quote_is_one_bad_row_to_the_end(tmp_path: Path) -> None:
    rows, bad = read(tmp_path, "a.csv", b'text,n\nfine,1\n"never closed,2\nmore,3\nrows,4\n')
    assert rows == [{"id": "a.csv:0", "text": "fine"}]
    [(line, reason, _)] = bad
    assert (line, reason) == (2, "row has 1 cells, not the header's 2")


def test_missing_text_column_duplicate_and_unreadable_headers_are_refused(tmp_path: Path) -> None:
    with pytest.raises(
        CurateError,
        match=r"^a\.csv: no column 'text' \(the recipe's text_field\); it has: title, body$",
    ):
        read(tmp_path, "a.csv", b"title,body\nx,y\n")
    with pytest.raises(CurateError, match=r"^a\.csv: column 'text' appears 2 times in its header"):
        read(tmp_path, "a.csv", b"text,text\nx,y\n")
    with pytest.raises(CurateError, match=r"its header row is not UTF-8"):
        read(tmp_path, "a.csv", b"t\xffxt\nx\n")
    with pytest.raises(CurateError, match=r"no header row ending within its first MiB"):
        read(tmp_path, "a.csv", b"x" * (2 << 20))


def test_empty_and_header_only_files_have_no_rows(tmp_path: Path) -> None:
    assert read(tmp_path, "a.csv", b"") == ([], [])
    assert read(tmp_path, "b.csv", b"text,id\n") == ([], [])
    assert read(tmp_path, "c.csv", b"\xef\xbb\xbftext\r\n") == ([], [])


def test_a_row_longer_than_the_first_block_is_read_by_growing_it(tmp_path: Path) -> None:
    long = b"w" * (3 << 20)
    data = b"text\n" + b"".join(b"row %d\n" % i if i != 5 else long + b"\n" for i in range(10))
    rows, bad = read(tmp_path, "a.csv", data, batch_bytes=1 << 16)
    assert [r["id"] for r in rows] == [f"a.csv:{i}" for i in range(10)] and bad == []
    assert len(rows[5]["text"]) == len(long)
    # over max_document_bytes but within the largest block: read, then set aside by size
    rows, bad = read(tmp_path, "a.csv", data, batch_bytes=1 << 16, max_document_bytes=2 << 20)
    assert len(rows) == 9 and [(b[0], b[1].split(":")[0]) for b in bad] == [
        (None, "document_too_large")
    ]


def test_a_row_longer_than_the_largest_block_ends_the_file(tmp_path: Path) -> None:
    data = b"text\n" + b"".join(
        b"row %d\n" % i if i != 5 else b"w" * (8 << 20) + b"\n" for i in range(10)
    )
    rows, bad = read(tmp_path, "a.csv", data, batch_bytes=1 << 16, max_document_bytes=1 << 20)
    assert [r["id"] for r in rows] == [f"a.csv:{i}" for i in range(5)]
    [(line, reason, nbytes)] = bad
    assert (
        line == 6
        and reason == "a row longer than 2,097,152 bytes; the rest of the file was not read"
    )
    assert nbytes == 0  # unknown: the reader cannot say where the row began


@pytest.mark.timeout(600)
def test_csv_end_to_end_read_back_with_datasets_and_accounted(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    rows = "".join(f'd{i},"document {i}\nhas words, and more words",{i % 3}\n' for i in range(50))
    (tmp_path / "data" / "a.csv").write_text("id,text,group\n" + rows + "bad,row\n")
    (tmp_path / "data" / "b.tsv").write_text("id\ttext\tgroup\nt1\ttab separated words here\t7\n")
    recipe = write_recipe(tmp_path, inputs=["data/*"], fields={"group": "int32"})
    version = curate.run(recipe)
    ds = datasets.load_from_disk(str(version.path))["train"]  # a version without splits
    assert len(ds) == 51 and ds.features["group"].dtype == "int32"
    got = dict(zip(ds["id"], ds["text"], strict=True))
    assert got["d7"] == "document 7\nhas words, and more words" and got["t1"].startswith("tab")
    assert [r["reason"] for r in version.quarantined().to_pylist()] == [
        "row has 2 cells, not the header's 3"
    ]
    c = version.counts
    assert c["read"] == c["written"] + c["removed_total"] + c["quarantined"] == 52
    docs = {i["name"]: (i["documents"], i["quarantined"]) for i in version.manifest["inputs"]}
    assert docs == {"data/a.csv": (50, 1), "data/b.tsv": (1, 0)}


@pytest.mark.timeout(600)
def test_a_1_gib_value_ends_the_file_with_memory_bounded(tmp_path: Path) -> None:
    """A quoted value of 1 GiB (a sparse file: NUL bytes nobody stored): the block grows to
    max_document_bytes (64 MiB) and no further, the rows before it are read, the rest goes
    to quarantine as one record, and the run's peak RSS grows by less than 1 GiB (the
    value's size: it is never held) over the same file with an ordinary value there.
    Arrow's reader holds a few blocks while it looks for a row's end: 400-580 MiB here."""
    peaks = {}
    for case in ("ordinary", "huge"):
        folder = tmp_path / case
        (folder / "data").mkdir(parents=True)
        with open(folder / "data" / "a.csv", "wb") as f:
            f.write(b"text\n" + b"".join(b"good row %d with words\n" % i for i in range(20)))
            f.write(b'"')
            if case == "huge":
                f.seek(1 << 30, os.SEEK_CUR)
            f.write(b'"\nafter the value\n')
        recipe = write_recipe(folder, inputs=["data/*"], stages=[{"normalize": {}}])
        cfg = yaml.safe_load(recipe.read_text())
        cfg.pop("id_field")
        recipe.write_text(yaml.safe_dump(cfg, sort_keys=False))
        peaks[case] = cli_peak_rss(recipe)
    grown = peaks["huge"] - peaks["ordinary"]
    print(f"\n.csv, one 1 GiB value: peak RSS {peaks['huge'] / 2**20:.0f} MiB, with an "
          f"ordinary one {peaks['ordinary'] / 2**20:.0f} MiB")  # fmt: skip
    version = curate.open(tmp_path / "huge" / "out" / "t")
    [row] = version.quarantined().to_pylist()
    assert (row["file"], row["line"]) == ("data/a.csv", 21)
    assert row["reason"] == "a row longer than 68,157,440 bytes; the rest of the file was not read"
    assert sorted(version.to_arrow()["id"].to_pylist()) == sorted(
        f"data/a.csv:{i}" for i in range(20)
    )
    assert grown < 2**30, f"peak RSS grew by {grown / 2**20:.0f} MiB"

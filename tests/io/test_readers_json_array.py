""".json inputs holding one array of records: streamed a chunk at a time, each record judged
as a JSONL line is, numbered as a row (`name:row`; quarantine by 1-based record), hostile
files ending in their documented outcome, memory bounded by a batch, not the file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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
from curate.io.json_array_scan import Record, cut
from curate.io.partitions import plan_partitions
from curate.reading import read_partition

PLAIN = FieldSpec()
TRICKY = [
    {"id": "a", "text": 'quotes " and \\ backslashes \\\\" and \\" , ] } [ {', "n": 1},
    {"id": "b", "text": "caf\u00e9 \u20ac \U0001f916 \\u0041\n\ttabs", "n": None},
    {"id": "c", "text": "\\" * 7, "nested": [[{"a": "]"}], {"b": [1, 2, {"c": "}"}]}]},
    {"id": "d", "text": ""},
]


def read(
    root: Path, name: str, data: bytes, fields: FieldSpec = PLAIN, **kw: object
) -> tuple[list[dict], list[tuple[int | None, str, int]]]:
    (root / name).write_bytes(data)
    parts = plan_partitions(discover_inputs([name], root), 16)
    assert len(parts) == 1  # a JSON array is one partition, whatever the target size
    rows: list[dict] = []
    bad: list[QuarantineRecord] = []
    for chunk in read_partition(parts[0], fields, **kw):  # type: ignore[arg-type]
        assert chunk.batch.schema == fields.schema()
        rows += chunk.batch.to_pylist()
        bad += chunk.quarantined
    return rows, [(q.line, q.reason, q.nbytes) for q in bad]


@pytest.mark.parametrize("indent", [None, 2])
def test_records_compact_or_pretty_printed_with_derived_and_given_ids(
    tmp_path: Path, indent: int | None
) -> None:
    data = b"\xef\xbb\xbf" + json.dumps(TRICKY, indent=indent).encode()
    rows, bad = read(tmp_path, "a.json", data, FieldSpec("text", None, {"n": pa.int64()}))
    assert bad == []
    assert rows == [
        {"id": f"a.json:{i}", "text": r["text"], "n": r.get("n")} for i, r in enumerate(TRICKY)
    ]
    rows, _ = read(tmp_path, "a.json", data, FieldSpec("text", "id"), batch_bytes=10)
    assert [r["id"] for r in rows] == ["a", "b", "c", "d"]


def test_the_cutter_gives_the_same_records_whatever_the_chunks(tmp_path: Path) -> None:
    """Strings, escapes and brackets carried across every possible chunk boundary."""
    data = json.dumps(TRICKY, indent=1, ensure_ascii=False).encode()
    whole = list(cut(iter([data]), 1 << 20))
    assert [json.loads(e.data) for e in whole if isinstance(e, Record)] == TRICKY
    for size in (1, 2, 3, 5, 7, 64):
        pieces = [data[i : i + size] for i in range(0, len(data), size)]
        assert list(cut(iter(pieces), 1 << 20)) == whole, size


def test_bad_records_are_quarantined_by_number_and_the_rest_read(tmp_path: Path) -> None:
    data = (
        b'[{"text": "first"}, 3, "s", [], {"text": "caf\xe9"}, {"text": 5}, {"body": "x"},'
        b' {"text": "a\x00b"}, {"text": "line\nbreak"}, , {"text": "' + b"[" * 40 + b'"},'
        b' {"a": ' + b"[" * 100_000 + b"]" * 100_000 + b'}, {"text": "last"} ]\n'
    )
    rows, bad = read(tmp_path, "a.json", data)
    assert rows == [
        {"id": "a.json:0", "text": "first"},
        {"id": "a.json:10", "text": "[" * 40},
        {"id": "a.json:12", "text": "last"},
    ]
    assert [(line, reason) for line, reason, _ in bad] == [
        (2, "record is a JSON int, not an object"),
        (3, "record is a JSON string, not an object"),
        (4, "record is a JSON array, not an object"),
        (5, "invalid UTF-8 at byte 13 of the record"),
        (6, "text field 'text' is int, not a string"),
        (7, "missing text field 'text'"),
        (8, "malformed JSON: Invalid control character at column 12"),
        (9, "malformed JSON: a line break inside a string"),
        (10, "malformed JSON array: an empty record (a comma too many)"),
        (12, "malformed JSON: nested too deeply"),
    ]
    with pytest.raises(CurateError, match=r"^a\.json:2: record is a JSON int"):
        read(tmp_path, "a.json", data, on_error="fail")


def test_cut_short_unclosed_and_trailing_files_keep_their_whole_records(tmp_path: Path) -> None:
    rows, bad = read(tmp_path, "a.json", b'[{"text": "a"}, {"text": "cut sh')
    assert rows == [{"id": "a.json:0", "text": "a"}]
    assert bad == [(2, "truncated JSON array: the file ends inside this record", 17)]  # as written
    rows, bad = read(tmp_path, "b.json", b'[{"text": "a"}, {"text": "b"}\n')
    assert [r["text"] for r in rows] == ["a", "b"]
    assert bad == [(3, "truncated JSON array: the file ends before its closing ]", 0)]
    rows, bad = read(tmp_path, "c.json", b'[{"text": "a"}] {"text": "b"}\n')
    assert [r["text"] for r in rows] == ["a"]
    assert bad == [(2, "content after the JSON array's closing ]", len('{"text":"b"}'))]


@pytest.mark.parametrize(
    ("data", "what"),
    [
        (b"", "no JSON value (an empty file; write [] for no records)"),
        (b" \n\t", "no JSON value (an empty file; write [] for no records)"),
        (b'\xef\xbb\xbf {"text": "a"}', "an object, not an array of records"),
        (b"-12", "a number, not an array of records"),
        (b"null", "null, not an array of records"),
        (b'{"text": "a"}\n{"text": "b"}\n', "an object, not an array of records"),
        (b"\xff[]", "not JSON (it does not start with [)"),
    ],
)
def test_a_file_that_holds_no_array_is_refused_before_anything_is_read(
    tmp_path: Path, data: bytes, what: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # messages show paths from the current folder
    (tmp_path / "a.json").write_bytes(data)
    with pytest.raises(CurateError) as exc:
        discover_inputs(["a.json"], tmp_path)
    assert str(exc.value) == f"input 'a.json' holds {what}"


def test_an_empty_array_has_no_records(tmp_path: Path) -> None:
    assert read(tmp_path, "a.json", b"[]") == ([], [])
    assert read(tmp_path, "b.json", b"\xef\xbb\xbf\n[\n]\n") == ([], [])


def test_a_record_over_max_document_bytes_is_set_aside_unread(tmp_path: Path) -> None:
    records = [{"text": "a"}, {"text": "x" * 5000}, {"text": "c"}]
    data = json.dumps(records, indent=1).encode()
    rows, bad = read(tmp_path, "a.json", data, max_document_bytes=1000, batch_bytes=10)
    assert [r["id"] for r in rows] == ["a.json:0", "a.json:2"]
    [(line, reason, nbytes)] = bad
    assert (line, reason) == (2, "document_too_large: over max_document_bytes (1,000 bytes)")
    assert 5000 < nbytes < 5100  # as written, with its indentation


def chat(i: int) -> dict[str, Any]:
    return {"id": f"c{i}", "messages": [{"role": "user", "content": f"question {i}"},
                                        {"role": "assistant", "content": f"answer {i}"}]}  # fmt: skip


@pytest.mark.timeout(600)
def test_json_arrays_end_to_end_text_and_chat_read_back_with_datasets(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    docs = [{"id": f"d{i}", "text": f"document {i} has some words"} for i in range(30)]
    text = json.dumps([*docs, 7], indent=2)
    (tmp_path / "data" / "a.json").write_text(text)
    (tmp_path / "data" / "b.jsonl").write_text('{"id": "j", "text": "a line of words"}\n')
    version = curate.run(write_recipe(tmp_path, inputs=["data/*"]))
    ds = datasets.load_from_disk(str(version.path))["train"]  # a version without splits
    assert sorted(ds["id"]) == sorted([*(d["id"] for d in docs), "j"])
    assert version.quarantined().to_pylist() == [
        {"file": "data/a.json", "line": 31, "reason": "record is a JSON int, not an object",
         "bytes": 1, "offset": text.rindex("7")}  # where the record is in the file
    ]  # fmt: skip
    c = version.counts
    assert c["read"] == c["written"] + c["removed_total"] + c["quarantined"] == 32
    docs_in = {i["name"]: (i["documents"], i["quarantined"]) for i in version.manifest["inputs"]}
    assert docs_in == {"data/a.json": (30, 1), "data/b.jsonl": (1, 0)}

    chats = tmp_path / "chats"
    (chats / "data").mkdir(parents=True)
    (chats / "data" / "c.json").write_text(json.dumps([chat(i) for i in range(5)] + [{"x": 1}]))
    recipe = write_recipe(chats, inputs=["data/*"], chat={"shape": "messages"}, stages=[])
    cfg = yaml.safe_load(recipe.read_text())
    cfg.pop("id_field")
    recipe.write_text(yaml.safe_dump(cfg, sort_keys=False))
    version = curate.run(recipe)
    ds = datasets.load_from_disk(str(version.path))["train"]  # a version without splits
    assert sorted(ds["id"]) == [f"data/c.json:{i}" for i in range(5)]
    assert ds[0]["messages"][1]["content"].startswith("answer")
    assert [(r["line"], r["reason"].split(":")[0]) for r in version.quarantined().to_pylist()] == [
        (6, "chat")
    ]


def test_chat_records_from_csv_are_refused(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "c.csv").write_text("messages\nx\n")
    with pytest.raises(CurateError, match=r"chat records are read from JSONL .* or a \.json array"):
        curate.run(write_recipe(tmp_path, inputs=["data/*"], chat={"shape": "messages"}))


READ_PEAK = """
import resource, sys
from pathlib import Path
from curate.io.batches import FieldSpec
from curate.io.inputs import discover_inputs
from curate.io.partitions import plan_partitions
from curate.reading import read_partition
rows = 0
for part in plan_partitions(discover_inputs([sys.argv[1]], Path(sys.argv[2])), 1 << 30):
    for chunk in read_partition(part, FieldSpec("text", "id")):
        rows += chunk.batch.num_rows
print(rows, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


@pytest.mark.timeout(600)
def test_memory_reading_a_large_array_is_bounded_by_a_batch_not_the_file(tmp_path: Path) -> None:
    """An 80 MB array (pretty-printed, 40,000 records of 2 KB) read in a child process: its
    peak RSS grows by less than 160 MB over reading a 1 MB array. `json.load` of the file
    alone holds ~250 MB (measured: peak RSS +280 MB)."""
    peaks = {}
    for name, n in (("small", 500), ("big", 40_000)):
        with open(tmp_path / f"{name}.json", "w") as f:
            f.write("[\n")
            for i in range(n):
                record = {"id": f"r{i}", "text": f"record {i} " + "words and more " * 130}
                f.write(("" if i == 0 else ",\n") + json.dumps(record, indent=2))
            f.write("\n]\n")
        out = subprocess.run([sys.executable, "-c", READ_PEAK, f"{name}.json", str(tmp_path)],
                             capture_output=True, text=True, check=True)  # fmt: skip
        rows, peaks[name] = map(int, out.stdout.split())
        assert rows == n
    size = os.path.getsize(tmp_path / "big.json")
    grown = peaks["big"] - peaks["small"]
    print(f"\n{size / 1e6:.0f} MB JSON array: peak RSS {peaks['big'] / 2**20:.0f} MiB, "
          f"a 1 MB one {peaks['small'] / 2**20:.0f} MiB")  # fmt: skip
    assert size > 75e6
    assert grown < 160e6, f"peak RSS grew by {grown / 2**20:.0f} MiB"


@pytest.mark.timeout(600)
def test_a_1_gib_value_is_set_aside_unread_with_memory_bounded(tmp_path: Path) -> None:
    """A record holding a string of 1 GiB (a sparse file: NUL bytes nobody stored) is set
    aside as it streams by, by its number and size; the records after it keep their ids;
    the run's peak RSS grows by less than 256 MiB over the same file with a small record."""
    peaks = {}
    for case in ("ordinary", "huge"):
        folder = tmp_path / case
        (folder / "data").mkdir(parents=True)
        before = ", ".join(json.dumps({"text": f"good record {i} with words"}) for i in range(20))
        with open(folder / "data" / "a.json", "wb") as f:
            huge_at = len(f"[{before}, ")
            f.write(f'[{before}, {{"text": "'.encode())
            if case == "huge":
                f.seek(1 << 30, os.SEEK_CUR)
            f.write(b'"}, {"text": "after the huge one"}]\n')
        recipe = write_recipe(folder, inputs=["data/*"], stages=[{"normalize": {}}])
        cfg = yaml.safe_load(recipe.read_text())
        cfg.pop("id_field")
        recipe.write_text(yaml.safe_dump(cfg, sort_keys=False))
        peaks[case] = cli_peak_rss(recipe)
    grown = peaks["huge"] - peaks["ordinary"]
    print(f"\n.json, one 1 GiB value: peak RSS {peaks['huge'] / 2**20:.0f} MiB, with a "
          f"small one {peaks['ordinary'] / 2**20:.0f} MiB")  # fmt: skip
    version = curate.open(tmp_path / "huge" / "out" / "t")
    [row] = version.quarantined().to_pylist()
    assert row == {"file": "data/a.json", "line": 21, "bytes": len('{"text": ""}') + (1 << 30) + 1,
                   "reason": "document_too_large: over max_document_bytes (67,108,864 bytes)",
                   "offset": huge_at}  # fmt: skip
    ids = [*(f"data/a.json:{i}" for i in range(20)), "data/a.json:21"]
    assert sorted(version.to_arrow()["id"].to_pylist()) == sorted(ids)
    assert grown < 256 * 2**20, f"peak RSS grew by {grown / 2**20:.0f} MiB"

"""Reading plain JSONL: fields, ids, every record-level problem, and fast/slow path agreement."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pyarrow as pa
import pytest

from curate.errors import CurateError
from curate.io import jsonl_judge
from curate.io.batches import FieldSpec, QuarantineRecord
from curate.io.inputs import discover_inputs
from curate.io.partitions import plan_partitions
from curate.reading import read_partition

KEEP = {"score": pa.float64(), "n": pa.int64(), "lang": pa.string(), "tags": pa.list_(pa.string())}


def read(
    tmp_path: Path,
    data: bytes,
    fields: FieldSpec | None = None,
    name: str = "a.jsonl",
    **kw: object,
) -> tuple[list[dict], list[QuarantineRecord]]:
    (tmp_path / name).write_bytes(data)
    part = plan_partitions(discover_inputs([name], tmp_path), 10**9)[0]
    rows: list[dict] = []
    bad: list[QuarantineRecord] = []
    for chunk in read_partition(part, fields or FieldSpec(), **kw):  # type: ignore[arg-type]
        assert chunk.batch.schema == (fields or FieldSpec()).schema()
        rows += chunk.batch.to_pylist()
        bad += chunk.quarantined
    return rows, bad


def lines(*records: object) -> bytes:
    return b"".join(
        (r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in records
    )


def test_derived_ids_are_where_lines_start(tmp_path: Path) -> None:
    data = lines({"text": "a"}, b"", b"  \t ", {"text": "b"}, b"\r", {"text": "c"})
    rows, bad = read(tmp_path, data)
    assert rows == [
        {"id": "a.jsonl@0", "text": "a"},
        {"id": "a.jsonl@20", "text": "b"},
        {"id": "a.jsonl@36", "text": "c"},
    ]
    assert [data.index(b'{"text": "%s"}' % t) for t in (b"b", b"c")] == [20, 36]
    assert bad == []


def test_id_field_strings_and_integers_and_kept_fields(tmp_path: Path) -> None:
    fields = FieldSpec("body", "doc", KEEP)
    data = lines(
        {"doc": "x1", "body": "one", "score": 1, "n": 2, "lang": "en", "tags": ["a"], "other": {}},
        {"doc": 7, "body": "two"},
        {"doc": 12345678901234567890123, "body": "three", "score": 0.5},
    )
    rows, bad = read(tmp_path, data, fields)
    assert bad == []
    assert rows == [
        {"id": "x1", "text": "one", "score": 1.0, "n": 2, "lang": "en", "tags": ["a"]},
        {"id": "7", "text": "two", "score": None, "n": None, "lang": None, "tags": None},
        {"id": "12345678901234567890123", "text": "three", "score": 0.5, "n": None}
        | {"lang": None, "tags": None},
    ]


def test_integer_ids_take_the_fast_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_slow(*args: object) -> None:
        raise AssertionError("slow path used")

    monkeypatch.setattr(jsonl_judge.LineJudge, "judge", no_slow)
    data = lines(*({"id": i, "text": f"t{i}"} for i in range(100)))
    rows, _ = read(tmp_path, data, FieldSpec("text", "id"))
    assert [r["id"] for r in rows] == [str(i) for i in range(100)]
    data = lines(*({"id": f"s{i}", "text": f"t{i}"} for i in range(100)))
    rows, _ = read(tmp_path, data, FieldSpec("text", "id", KEEP), batch_bytes=500)
    assert [r["id"] for r in rows] == [f"s{i}" for i in range(100)]


BAD = [
    (
        b'{"text": "SECRET unterminated',
        "malformed JSON: Unterminated string starting at column 10",
    ),
    (b"[1, 2]", "line is a JSON array, not an object"),
    (b'"just a string"', "line is a JSON string, not an object"),
    (b"null", "line is a JSON null, not an object"),
    (b'{"text": "caf\xe9"}', "invalid UTF-8 at byte 13 of the line"),
    (b'{"id": "x"}', "missing text field 'text'"),
    (b'{"text": null}', "text field 'text' is null"),
    (b'{"text": 42}', "text field 'text' is int, not a string"),
    (b'{"text": ["a"]}', "text field 'text' is array, not a string"),
    (b'{"text": "a"} {"text": "b"}', "malformed JSON at column 15: Extra data"),
    (b'{"text": "a"}\r{"text": "b"}', "malformed JSON at column 15: Extra data"),
    (b'{"text": "lone \\ud800 SECRET"}', "JSON the Arrow reader rejects: The surrogate pair"),
    (b'{"text": "a", "n": 1.5}', "field 'n' is float, not int64"),
    (b'{"text": "a", "n": "7"}', "field 'n' is string, not int64"),
    (b'{"text": "a", "n": 99999999999999999999}', "field 'n' cannot be read as int64"),
    (b'{"text": "a", "lang": 3}', "field 'lang' is int, not string"),
    (b'{"text": "a", "score": true}', "field 'score' is bool, not float64"),
    (b'{"text": "a", "tags": "x"}', "field 'tags' is string, not list<string>"),
    (b'{"text": "a", "tags": [1]}', "field 'tags' cannot be read as list<string>"),
    (b'{"text": "a", "other": 1e999}', "JSON the Arrow reader rejects: Number too big"),
    (
        b"\xef\xbb\xbf" + b'{"text": "SECRET BOM mid-file"}',
        "malformed JSON at column 1: Unexpected UTF-8 BOM",
    ),
]


@pytest.mark.parametrize(("line", "reason"), BAD)
def test_bad_record_is_quarantined_with_line_and_size_not_content(
    tmp_path: Path, line: bytes, reason: str
) -> None:
    good = {"text": "fine", "n": 1}
    data = lines(good, line, good)
    rows, bad = read(tmp_path, data, FieldSpec(keep_fields=KEEP))
    second = len(lines(good))
    assert [r["id"] for r in rows] == ["a.jsonl@0", f"a.jsonl@{second + len(line) + 1}"]
    assert len(bad) == 1
    q = bad[0]
    assert (q.file, q.line, q.nbytes, q.offset) == ("a.jsonl", 2, len(line), second)
    assert q.reason.startswith(reason)
    assert "SECRET" not in q.reason and "caf" not in q.reason


@pytest.mark.parametrize(("line", "reason"), BAD)
def test_on_error_fail_names_file_line_and_reason(tmp_path: Path, line: bytes, reason: str) -> None:
    data = lines({"text": "fine"}, b"", line)
    with pytest.raises(CurateError) as exc:
        read(tmp_path, data, FieldSpec(keep_fields=KEEP), on_error="fail")
    assert str(exc.value).startswith(f"a.jsonl:3: {reason}")
    assert str(exc.value).endswith("(the recipe's on_error: fail stops at the first bad record; "
                                   "quarantine sets them aside)")  # fmt: skip


def test_id_problems(tmp_path: Path) -> None:
    data = lines(
        {"id": "ok", "text": "a"},
        {"text": "b"},
        {"id": None, "text": "c"},
        {"id": 1.5, "text": "d"},
        {"id": True, "text": "e"},
        {"id": {"k": 1}, "text": "f"},
        {"id": 5, "text": "g"},
    )
    rows, bad = read(tmp_path, data, FieldSpec("text", "id"))
    assert [r["id"] for r in rows] == ["ok", "5"]
    assert [(q.line, q.reason) for q in bad] == [
        (2, "missing id field 'id'"),
        (3, "id field 'id' is null, not a string or integer"),
        (4, "id field 'id' is float, not a string or integer"),
        (5, "id field 'id' is bool, not a string or integer"),
        (6, "id field 'id' is object, not a string or integer"),
    ]


def test_bom_at_start_crlf_and_no_final_newline(tmp_path: Path) -> None:
    data = b'\xef\xbb\xbf{"text": "first"}\r\n\r\n{"text": "second\\r\\n"}\r\n{"text": "last"}'
    rows, bad = read(tmp_path, data)
    assert rows == [  # the first line's bytes start after the byte-order mark
        {"id": "a.jsonl@3", "text": "first"},
        {"id": "a.jsonl@24", "text": "second\r\n"},
        {"id": "a.jsonl@48", "text": "last"},
    ]
    assert [data.index(b'{"text": "%s' % t) for t in (b"second", b"last")] == [24, 48]
    assert bad == []


def test_invalid_utf8_on_the_first_line_after_a_bom(tmp_path: Path) -> None:
    _, bad = read(tmp_path, b'\xef\xbb\xbf{"text": "\xff"}\n')
    assert [(q.line, q.reason) for q in bad] == [(1, "invalid UTF-8 at byte 10 of the line")]


def test_empty_and_blank_files_yield_nothing(tmp_path: Path) -> None:
    assert read(tmp_path, b"") == ([], [])
    assert read(tmp_path, b"\n  \n\r\n") == ([], [])


def test_batches_respect_batch_bytes_and_keep_order(tmp_path: Path) -> None:
    data = lines(*({"text": f"document {i} " + "x" * 200} for i in range(500)))
    (tmp_path / "a.jsonl").write_bytes(data)
    part = plan_partitions(discover_inputs(["a.jsonl"], tmp_path), 10**9)[0]
    chunks = list(read_partition(part, FieldSpec(), batch_bytes=10_000))
    assert len(chunks) > 10
    assert all(c.batch.num_rows < 60 for c in chunks)
    ids = [i for c in chunks for i in c.batch.column("id").to_pylist()]
    starts = [0, *itertools.accumulate(len(line) for line in data.splitlines(keepends=True))]
    assert ids == [f"a.jsonl@{at}" for at in starts[:500]]


def test_a_line_longer_than_batch_bytes(tmp_path: Path) -> None:
    data = lines({"text": "short"}, {"text": "y" * 50_000}, {"text": "after"})
    rows, _ = read(tmp_path, data, batch_bytes=1000)
    assert [len(r["text"]) for r in rows] == [5, 50_000, 5]


def test_threads_give_the_same_result(tmp_path: Path) -> None:
    data = lines(*({"text": f"doc {i} " * (i % 50), "n": i} for i in range(3000)))
    fields = FieldSpec(keep_fields={"n": pa.int64()})
    assert read(tmp_path, data, fields, use_threads=True) == read(tmp_path, data, fields)


TRICKY = [
    *(line for line, _ in BAD),
    b'{"text": "dup", "text": "last wins"}',
    b'{"text": "a", "n": 3, "n": 4}',
    b'{"text": "nan", "score": NaN}',
    b'{"text": "inf", "other": -Infinity}',
    b'{"text": "pair \\ud83d\\ude00"}',
    b'{"text": "nul \\u0000 inside"}',
    b'{"text": "escaped \\"quote\\" and \\\\ slash"}',
    b'  {"text": "leading spaces"}  ',
    b'{"text": "", "n": -0}',
    b'{"text": "big", "n": 9223372036854775807}',
    b'{"text": "x", "id": "7", "lang": null}',
    b'{"id": 3, "text": "int id"}',
    b'{"id": -0, "text": "negative zero id"}',
    b'{"text": "deep", "other": ' + b"[" * 200 + b"]" * 200 + b"}",
    b'{"text": "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"}',
    b'{"text": "overlong \xc0\xaf"}',
    b'{"text": "cesu \xed\xa0\x80"}',
]


@pytest.mark.parametrize("id_field", [None, "id"])
def test_a_records_fate_does_not_depend_on_its_neighbours(
    tmp_path: Path, id_field: str | None
) -> None:
    """Alone, a line is read by the fast path; next to a malformed line, by the slow one."""
    fields = FieldSpec("text", id_field, KEEP)
    for i, line in enumerate(TRICKY):
        alone = read(tmp_path, line + b"\n", fields)
        mixed = read(tmp_path, line + b"\n" + b"{broken\n", fields)
        assert repr(alone[0]) == repr(mixed[0]), (i, line)  # repr: NaN == NaN
        assert alone[1] == mixed[1][:-1], (i, line)


@pytest.mark.parametrize("use_threads", [False, True])
def test_top_level_null_lines_anywhere_do_not_crash_arrow(
    tmp_path: Path, use_threads: bool
) -> None:
    """Arrow's reader segfaults on a block starting with `null` (apache/arrow#47409)."""
    records: list[object] = [
        b"null" if i % 7 == 0 else {"text": f"t{i}" * 300} for i in range(3000)
    ]
    rows, bad = read(tmp_path, lines(*records), use_threads=use_threads, batch_bytes=1 << 30)
    assert len(rows) == 3000 - len(bad)
    assert {q.reason for q in bad} == {"line is a JSON null, not an object"}
    assert [q.line for q in bad] == [i + 1 for i in range(0, 3000, 7)]


def test_many_bad_lines_in_one_block(tmp_path: Path) -> None:
    """More bad lines than the fast path locates one by one: the rest is judged line by line."""
    records: list[object] = []
    for i in range(400):
        if i % 9 == 4:
            records.append(b'{"text": broken')
        elif i % 9 == 7:
            records.append({"text": None})
        elif i % 9 == 8:
            records.append({"no_text": 1})
        else:
            records.append({"text": f"t{i}"})
    rows, bad = read(tmp_path, lines(*records))
    assert [r["text"] for r in rows] == [f"t{i}" for i in range(400) if i % 9 not in (4, 7, 8)]
    assert [q.line for q in bad] == [i + 1 for i in range(400) if i % 9 in (4, 7, 8)]
    assert {q.reason.split(" at ")[0] for q in bad} == {
        "malformed JSON",
        "text field 'text' is null, not a string",
        "missing text field 'text'",
    }


def test_null_texts_are_set_aside_without_judging_the_whole_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    judged: list[int] = []
    real = jsonl_judge.LineJudge.judge

    def spy(
        self: jsonl_judge.LineJudge, raws: list[bytes], first: int, offset: int
    ) -> pa.RecordBatch:
        judged.append(len(raws))
        return real(self, raws, first, offset)

    monkeypatch.setattr(jsonl_judge.LineJudge, "judge", spy)
    records = [{"text": None if i % 10 == 0 else f"t{i}"} for i in range(1000)]
    rows, bad = read(tmp_path, lines(*records))
    assert len(rows) == 900 and len(bad) == 100 and judged == [1] * 100


def test_mixed_id_kinds_and_misleading_arrow_rows(tmp_path: Path) -> None:
    records: list[object] = [{"id": i if i % 3 else f"s{i}", "text": f"t{i}"} for i in range(60)]
    records[20] = b'{"id": "two", "text": "a"} {"id": "values", "text": "b"}'
    records[25] = b'{"id": 25, "text": 25}'
    rows, bad = read(tmp_path, lines(*records), FieldSpec("text", "id"))
    expected = [str(i) if i % 3 else f"s{i}" for i in range(60) if i not in (20, 25)]
    assert [r["id"] for r in rows] == expected
    assert [(q.line, q.reason.split(":")[0]) for q in bad] == [
        (21, "malformed JSON at column 28"),
        (26, "text field 'text' is int, not a string"),
    ]


def test_on_error_fail_reports_the_earliest_bad_line_of_a_block(tmp_path: Path) -> None:
    data = lines({"text": "a"}, {"text": None}, b"{broken", {"text": 3})
    with pytest.raises(CurateError, match=r"^a\.jsonl:2: text field 'text' is null"):
        read(tmp_path, data, on_error="fail")


def damaged_lines(seed: int, n: int) -> list[bytes]:
    """Records with odd values, then random JSON-significant edits."""
    rng = random.Random(seed)
    alphabet = [b"{", b"}", b"[", b'"', b":", b",", b"\\", b"null", b"\\ud800", b"\x00", b"\xff"]
    alphabet += [b"\xc3", b"\r", b" ", b"1", b"e", b".", b"true", b"NaN", b"\t"]
    out = []
    for _ in range(n):
        record: dict[str, object] = {
            "text": rng.choice(["a", "h\u00e9llo", "", 5, None, ["l"]]),
            "id": rng.choice(["i", 3, None, 2.5, True, 10**20]),
        }
        for key in KEEP:
            if rng.random() < 0.5:
                record[key] = rng.choice([1, 2.5, "s", None, ["a"], [1], True, {"o": 1}, 10**19])
        line = json.dumps(record, ensure_ascii=rng.random() < 0.5).encode()
        for _ in range(rng.choice([0, 0, 1, 2])):
            i = rng.randrange(len(line) + 1)
            line = line[:i] + rng.choice(alphabet) + line[i + rng.choice([0, 1]) :]
        out.append(line.replace(b"\n", b""))
    return out


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("id_field", [None, "id"])
def test_random_damage_is_judged_line_by_line(
    tmp_path: Path, seed: int, id_field: str | None
) -> None:
    """Each line alone and all lines in one block (fast path with hops) agree."""
    fields = FieldSpec("text", id_field, KEEP)
    damaged = damaged_lines(seed, 80)
    rows, bad = read(tmp_path, b"\n".join(damaged) + b"\n", fields)
    threaded = read(tmp_path, b"\n".join(damaged) + b"\n", fields, use_threads=True)
    assert repr((rows, bad)) == repr(threaded)
    alone_rows: list[dict] = []
    alone_bad = []
    starts = [0, *itertools.accumulate(len(line) + 1 for line in damaged)]
    for i, line in enumerate(damaged):
        r, b = read(tmp_path, b"{}\n" + line + b"\n", fields)  # line 2: no file-start BOM
        for row in r:
            if id_field is None:
                row["id"] = f"a.jsonl@{starts[i]}"
        alone_rows += r
        alone_bad += [(i + 1, q.reason, q.nbytes, starts[i]) for q in b if q.line == 2]
    assert repr(alone_rows) == repr(rows)
    assert alone_bad == [(q.line, q.reason, q.nbytes, q.offset) for q in bad]

"""Line numbers of plain JSONL partitions (`curate.io.line_numbers`): counted only when a
partition has something to say about a line, once per file and worker, and always true."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from curate.errors import CurateError
from curate.io import line_numbers
from curate.io.batches import FieldSpec
from curate.io.inputs import discover_inputs
from curate.io.partitions import Partition, plan_partitions
from curate.reading import read_partition

needs_proc_io = pytest.mark.skipif(
    not Path("/proc/self/io").exists(), reason="needs Linux's /proc/self/io"
)


def bytes_read() -> int:
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


def big_file(tmp_path: Path, bad: set[int], n: int = 28_000) -> tuple[bytes, list[Partition]]:
    """n lines of about 100 bytes (those in `bad` malformed), in three partitions: lines
    15,000 in the second, 25,000 and 27,000 in the third."""
    lines = [
        b'{"text": "unterminated' if i in bad else json.dumps({"text": f"{i} " + "w" * 90}).encode()
        for i in range(n)
    ]
    data = b"\n".join(lines) + b"\n"
    (tmp_path / "a.jsonl").write_bytes(data)
    line_numbers._known.clear()  # what earlier tests counted in this process
    parts = plan_partitions(discover_inputs(["a.jsonl"], tmp_path), 1 << 20)
    firsts = [data[: p.start].count(b"\n") for p in parts]
    assert len(parts) == 3 and firsts[1] < 15_000 < firsts[2] < 25_000
    return data, parts


def read(part: Partition) -> tuple[int, list[tuple[int | None, int | None]]]:
    """Bytes read to read the partition, and its quarantined records' (line, offset)."""
    before = bytes_read()
    bad = [(q.line, q.offset) for c in read_partition(part, FieldSpec()) for q in c.quarantined]
    return bytes_read() - before, bad


@needs_proc_io
def test_a_clean_partition_counts_no_lines(tmp_path: Path) -> None:
    _, parts = big_file(tmp_path, bad=set())
    read(parts[0])  # what a first read imports
    read_bytes, bad = read(parts[2])
    assert bad == [] and read_bytes < (parts[2].stop - parts[2].start) + (64 << 10)


@needs_proc_io
def test_a_partition_with_a_bad_line_counts_the_lines_before_it_once(tmp_path: Path) -> None:
    data, parts = big_file(tmp_path, bad={25_000, 27_000})
    read(parts[0])  # what a first read imports
    read_bytes, bad = read(parts[2])
    at = data.index(b'{"text": "unterminated')
    assert bad == [(25_001, at), (27_001, data.index(b'{"text": "unterminated', at + 1))]
    assert read_bytes < len(data) + (64 << 10)  # its own bytes and those before it, once
    data, parts = big_file(tmp_path, bad={15_000, 25_000})
    first, second = data.index(b'{"text": "unterminated'), data.rindex(b'{"text": "unterminated')
    assert read(parts[1])[1] == [(15_001, first)]
    read_bytes, bad = read(parts[2])  # counted on from where the last count stopped, not from 0
    assert bad == [(25_001, second)]
    assert read_bytes < parts[2].stop - parts[1].start + (64 << 10)


def test_a_partition_that_starts_inside_a_line_numbers_the_next_one(tmp_path: Path) -> None:
    data = b'{"text": "a"}\n{"text": "b"}\n[1]\n'
    (tmp_path / "a.jsonl").write_bytes(data)
    inp = discover_inputs(["a.jsonl"], tmp_path)[0]
    for start in range(1, data.index(b"[1]") + 1):
        part = Partition(0, inp, start, len(data))
        quarantined = [q for c in read_partition(part, FieldSpec()) for q in c.quarantined]
        assert [(q.line, q.offset) for q in quarantined] == [(3, data.index(b"[1]"))]


def test_a_file_that_cannot_be_read_when_counting_fails_by_name(tmp_path: Path) -> None:
    _, parts = big_file(tmp_path, bad={25_000})
    os.chmod(tmp_path / "a.jsonl", 0)
    if os.access(tmp_path / "a.jsonl", os.R_OK):
        pytest.skip("running as a user who reads any file")
    with pytest.raises(CurateError, match=r"^a\.jsonl cannot be read"):
        read(parts[2])

"""Partition planning: stable, aligned to lines or natural pieces, and lossless when read back."""

from __future__ import annotations

import gzip
import itertools
import json
import os
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curate.io.batches import FieldSpec
from curate.io.inputs import discover_inputs
from curate.io.partitions import Partition, plan_partitions
from curate.reading import read_partition


def jsonl_lines(n: int, seed: int = 0) -> list[bytes]:
    """Lines of very different lengths, some blank, some CRLF, some bad."""
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        kind = rng.random()
        if kind < 0.05:
            lines.append(b"   ")
        elif kind < 0.08:
            lines.append(b'{"text": 5}')
        else:
            text = " ".join(f"w{rng.randrange(1000)}" for _ in range(rng.choice([1, 5, 40, 400])))
            line = json.dumps({"text": f"{i}: {text}", "n": i}).encode()
            lines.append(line + (b"\r" if kind > 0.9 else b""))
    return lines


def read_all(parts: list[Partition], fields: FieldSpec, **kw: object) -> tuple[list, list]:
    rows, bad = [], []
    for part in parts:
        for chunk in read_partition(part, fields, **kw):  # type: ignore[arg-type]
            rows += chunk.batch.to_pylist()
            bad += [(q.line, q.reason) for q in chunk.quarantined]
    return rows, bad


def test_small_and_compressed_files_are_one_partition(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(b"\n".join(jsonl_lines(50)) + b"\n")
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(b"\n".join(jsonl_lines(500)) + b"\n"))
    found = discover_inputs(["a.jsonl", "b.jsonl.gz"], tmp_path)
    parts = plan_partitions(found, 10**9)
    assert [(p.index, p.input.name, p.start, p.stop) for p in parts] == [
        (0, "a.jsonl", 0, found[0].size),
        (1, "b.jsonl.gz", 0, found[1].size),
    ]
    assert len(plan_partitions(found, 100)) == len(plan_partitions([found[0]], 100)) + 1


@pytest.mark.parametrize("target", [1, 37, 500, 4096, 20_000])
def test_split_jsonl_reads_every_line_once_with_its_number_and_offset(
    tmp_path: Path, target: int
) -> None:
    """Ids are where lines start, quarantined lines say their number and offset, however the
    file is split (the line numbers of a later partition are counted when it needs them)."""
    lines = jsonl_lines(300, seed=target)
    data = b"\n".join(lines)  # no newline at the end of the file
    (tmp_path / "a.jsonl").write_bytes(data)
    found = discover_inputs(["a.jsonl"], tmp_path)
    parts = plan_partitions(found, target)
    assert len(parts) > 1
    starts = [p.start for p in parts]
    assert starts[0] == 0 and parts[-1].stop == len(data)
    for prev, part in itertools.pairwise(parts):
        assert prev.stop == part.start and data[part.start - 1 : part.start] == b"\n"
    fields = FieldSpec(keep_fields={"n": pa.int64()})
    whole = plan_partitions(found, 10**9)
    assert read_all(parts, fields) == read_all(whole, fields)
    rows, bad = read_all(parts, fields)
    starts = [0, *itertools.accumulate(len(line) + 1 for line in lines)]
    expected = [starts[i] for i, line in enumerate(lines) if line.startswith(b'{"text": "')]
    assert [r["id"] for r in rows] == [f"a.jsonl@{at}" for at in expected]
    bad_lines = [i for i, x in enumerate(lines) if x == b'{"text": 5}']
    assert [line for line, _ in bad] == [i + 1 for i in bad_lines]
    offsets = [
        q.offset for part in parts for c in read_partition(part, fields) for q in c.quarantined
    ]
    assert offsets == [starts[i] for i in bad_lines]


def test_partitions_cut_anywhere_still_read_each_line_once(tmp_path: Path) -> None:
    """A partition owns the lines that start in [start, stop), wherever its bytes fall."""
    lines = jsonl_lines(120, seed=3)
    data = b"\n".join(lines) + b"\n"
    (tmp_path / "a.jsonl").write_bytes(data)
    inp = discover_inputs(["a.jsonl"], tmp_path)[0]
    rng = random.Random(7)
    cuts = sorted({0, len(data), *(rng.randrange(len(data)) for _ in range(15))})
    parts = [Partition(i, inp, a, b) for i, (a, b) in enumerate(itertools.pairwise(cuts))]
    fields = FieldSpec()
    whole = [Partition(0, inp, 0, len(data))]
    assert read_all(parts, fields, batch_bytes=300) == read_all(whole, fields)


def test_planning_is_deterministic(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(b"\n".join(jsonl_lines(400)) + b"\n")
    found = discover_inputs(["a.jsonl"], tmp_path)
    assert plan_partitions(found, 3000) == plan_partitions(found, 3000)
    with pytest.raises(ValueError):
        plan_partitions(found, 0)


def test_parquet_row_groups_are_grouped_with_first_rows(tmp_path: Path) -> None:
    table = pa.table({"text": [f"document number {i:04d} " * 20 for i in range(1000)]})
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=100)
    found = discover_inputs(["a.parquet"], tmp_path)
    md = pq.ParquetFile(tmp_path / "a.parquet").metadata
    group_bytes = max(md.row_group(i).total_byte_size for i in range(md.num_row_groups))
    parts = plan_partitions(found, group_bytes * 7 // 2)
    assert [(p.start, p.stop, p.first_row) for p in parts] == [
        (0, 3, 0),
        (3, 6, 300),
        (6, 9, 600),
        (9, 10, 900),
    ]
    rows, _ = read_all(parts, FieldSpec())
    assert [r["id"] for r in rows] == [f"a.parquet:{i}" for i in range(1000)]
    assert rows == read_all(plan_partitions(found, 10**12), FieldSpec())[0]


def test_arrow_batches_and_text_files_are_grouped(tmp_path: Path) -> None:
    table = pa.table({"text": [f"row {i:04d} " * 50 for i in range(400)]})
    with pa.ipc.new_stream(tmp_path / "a.arrow", table.schema) as w:
        for batch in table.to_batches(max_chunksize=50):
            w.write_batch(batch)
    notes = tmp_path / "notes"
    notes.mkdir()
    for i in range(10):
        (notes / f"{i:02d}.txt").write_text("x" * 1000)
    found = discover_inputs(["a.arrow", "notes"], tmp_path)
    batch_bytes = table.slice(0, 50).nbytes
    parts = plan_partitions(found, batch_bytes * 5 // 2)
    arrow_parts = [p for p in parts if p.input.format == "arrow"]
    assert [(p.start, p.stop, p.first_row) for p in arrow_parts] == [
        (0, 2, 0),
        (2, 4, 100),
        (4, 6, 200),
        (6, 8, 300),
    ]
    text_parts = [(p.start, p.stop) for p in plan_partitions([found[1]], 2500)]
    assert text_parts == [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10)]
    assert [p.index for p in parts] == list(range(len(parts)))
    rows, _ = read_all(arrow_parts, FieldSpec())
    assert [r["id"] for r in rows] == [f"a.arrow:{i}" for i in range(400)]


def test_empty_inputs_still_have_a_partition(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(b"")
    pq.write_table(pa.table({"text": pa.array([], pa.string())}), tmp_path / "b.parquet")
    parts = plan_partitions(discover_inputs(["a.jsonl", "b.parquet"], tmp_path), 100)
    assert len(parts) == 2 and parts[0].stop == 0
    assert read_all(parts, FieldSpec()) == ([], [])


def bytes_read() -> int:
    """What this process has read through read(2) and friends so far (page cache or not)."""
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs Linux's /proc/self/io")
def test_planning_a_2gb_jsonl_reads_kilobytes_per_partition(tmp_path: Path) -> None:
    """Boundaries are found by seeking to each target and reading on to the next newline, so
    planning does not read (nor count the lines of) the file: a sparse 2 GiB file whose
    lines end every 64 KiB costs at most a few windows at each of its 32 boundaries."""
    path, size, every = tmp_path / "big.jsonl", 2 << 30, 64 << 10
    line = b'{"text": "a line"}\n'
    with open(path, "wb") as f:
        f.truncate(size)
        for end in range(every, size + 1, every):
            os.pwrite(f.fileno(), line, end - len(line))
    found = discover_inputs(["big.jsonl"], tmp_path)
    before = bytes_read()
    parts = plan_partitions(found, 64 << 20)
    read = bytes_read() - before
    assert len(parts) == 32
    assert read <= len(parts) * (128 << 10), f"planning read {read:,} bytes"
    with open(path, "rb") as f:
        for part in parts[1:]:
            assert os.pread(f.fileno(), 1, part.start - 1) == b"\n"
    assert parts[-1].stop == size

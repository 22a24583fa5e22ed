"""The lines of JSONL partitions (`curate.io.lines`): cut into the same blocks as the readers
cut them before lines had a bound (so batches, and shards, are unchanged), and a line over
the bound set apart with its length, never held, whatever the pieces the bytes come in."""

from __future__ import annotations

import dataclasses
import gzip
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
import zstandard

from curate.io.compressed import decompressed
from curate.io.inputs import discover_inputs
from curate.io.lines import BOM, Block, Broken, LongLine, line_blocks, split_lines
from curate.io.partitions import Partition, plan_partitions


def old_range_blocks(path: Path, start: int, stop: int, batch_bytes: int) -> Iterator[bytes]:
    """The plain-file blocks of curate.io.jsonl at dfd99bd (lines unbounded)."""
    with open(path, "rb") as f:
        if start > 0:
            f.seek(start - 1)
            if f.read(1) != b"\n":
                f.readline()
        pos = f.tell()
        rest: list[bytes] = []
        while pos < stop:
            chunk = f.read(min(batch_bytes, stop - pos))
            if not chunk:
                break
            pos += len(chunk)
            cut = chunk.rfind(b"\n") + 1
            if not cut:
                rest.append(chunk)
            else:
                yield b"".join((*rest, chunk[:cut]))
                rest = [chunk[cut:]] if cut < len(chunk) else []
        if rest:
            yield b"".join((*rest, f.readline()))


def old_stream_blocks(pieces: Iterator[bytes], batch_bytes: int) -> Iterator[bytes]:
    """The compressed-file blocks of curate.io.jsonl at dfd99bd."""
    held: list[bytes] = []
    size = 0
    for piece in pieces:
        held.append(piece)
        size += len(piece)
        if size >= batch_bytes and b"\n" in piece:
            buf = b"".join(held)
            cut = buf.rfind(b"\n") + 1
            yield buf[:cut]
            held, size = [buf[cut:]], len(buf) - cut
    if buf := b"".join(held):
        yield buf


def random_lines(rng: random.Random, n: int, longest: int) -> list[bytes]:
    out = []
    for _ in range(n):
        kind = rng.random()
        if kind < 0.1:
            out.append(b"")
        elif kind < 0.15:
            out.append(b"  \r")
        else:
            out.append(b'{"text": "' + b"w" * rng.randint(0, longest) + b'"}')
    return out


def partitions(tmp_path: Path, name: str, data: bytes, target: int) -> list[Partition]:
    (tmp_path / name).write_bytes(data)
    return plan_partitions(discover_inputs([name], tmp_path), target)


def blocks(part: Partition, batch_bytes: int, limit: int | None = None) -> list[object]:
    return [e.data if isinstance(e, Block) else e for e in line_blocks(part, batch_bytes, limit)]


@pytest.mark.parametrize("seed", range(12))
def test_plain_blocks_are_cut_as_before(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    data = b"\n".join(random_lines(rng, 300, rng.choice([20, 300, 3000])))
    data = (BOM if seed % 3 == 0 else b"") + data + (b"\n" if seed % 2 else b"")
    batch_bytes = rng.choice([1, 7, 100, 4096, 1 << 20])
    for part in partitions(tmp_path, "a.jsonl", data, rng.choice([500, 5000, 10**6])):
        old = list(old_range_blocks(tmp_path / "a.jsonl", part.start, part.stop, batch_bytes))
        if part.start == 0 and old and old[0].startswith(BOM):
            old[0] = old[0][len(BOM) :]
        assert blocks(part, batch_bytes) == old
        assert blocks(part, batch_bytes, 10**6) == old  # a bound no line reaches


@pytest.mark.parametrize("seed", range(8))
def test_compressed_blocks_are_cut_as_before(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    lines = random_lines(rng, 2000, rng.choice([20, 300, 3000]))
    data = BOM + b"\n".join(lines) + b"\n"
    cut = rng.randrange(len(data))  # two members or frames, split anywhere
    if seed % 2:
        name, blob = "a.jsonl.gz", gzip.compress(data[:cut]) + gzip.compress(data[cut:])
    else:
        zc = zstandard.ZstdCompressor()
        name, blob = "a.jsonl.zst", zc.compress(data[:cut]) + zc.compress(data[cut:])
    [part] = partitions(tmp_path, name, blob, 1000)
    batch_bytes = rng.choice([1, 1000, 1 << 16, 1 << 20])
    old = list(old_stream_blocks(decompressed(str(tmp_path / name), part.input.format),
                                 batch_bytes))  # fmt: skip
    old[0] = old[0][len(BOM) :]
    assert blocks(part, batch_bytes) == old
    assert blocks(part, batch_bytes, 10**6) == old


def events_as_lines(events: list[object]) -> list[bytes | int]:
    """Every line the events hold, a LongLine as its length."""
    out: list[bytes | int] = []
    for e in events:
        if isinstance(e, bytes):
            out += [line.removesuffix(b"\n") for line in split_lines(e)]
        else:
            assert isinstance(e, LongLine)
            out.append(e.nbytes)
    return out


@pytest.mark.parametrize("seed", range(16))
def test_lines_over_the_bound_are_set_apart_with_their_length(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    limit = rng.choice([1, 50, 500, 5000])
    lines = random_lines(rng, 200, limit * 3)
    data = b"\n".join(lines) + b"\n"
    expected: list[bytes | int] = [line if len(line) <= limit else len(line) for line in lines]
    batch_bytes = rng.choice([1, 64, 1000, 1 << 16])
    got: list[bytes | int] = []
    for part in partitions(tmp_path, "a.jsonl", data, rng.choice([700, 10**6])):
        got += events_as_lines(blocks(part, batch_bytes, limit))
    assert got == expected
    if seed % 2:
        name, blob = "b.jsonl.gz", gzip.compress(data)
    else:
        name, blob = "b.jsonl.zst", zstandard.ZstdCompressor().compress(data)
    [part] = partitions(tmp_path, name, blob, 1000)
    assert events_as_lines(blocks(part, batch_bytes, limit)) == expected


def test_long_lines_at_a_partition_end_at_the_file_end_and_begun_before_a_start(
    tmp_path: Path,
) -> None:
    data = b"a\n" + b"x" * 5000 + b"\nb\n" + b"y" * 3000  # the last line has no newline
    parts = partitions(tmp_path, "a.jsonl", data, 1000)
    assert [p.stop for p in parts] == [5003, len(data)]  # the 5000-byte line ends the first
    got = [e for part in parts for e in blocks(part, 100, 1000)]
    assert got == [b"a\n", LongLine(5000, 2), b"b\n", LongLine(3000, 5005)]
    inside = dataclasses.replace(parts[0], start=10, stop=len(data))  # starts mid-line
    assert blocks(inside, 100, 1000) == [b"b\n", LongLine(3000, 5005)]


@pytest.mark.parametrize("seed", range(6))
def test_every_event_says_where_it_starts(tmp_path: Path, seed: int) -> None:
    """In the file for plain JSONL, in the decompressed stream otherwise: a block's bytes are
    there (after a BOM), a long line starts there, a broken stream's last line starts there."""
    rng = random.Random(seed)
    data = b"\n".join(random_lines(rng, 200, rng.choice([20, 300, 3000])))
    data = (BOM if seed % 2 == 0 else b"") + data + (b"\n" if seed % 3 else b"")
    limit = rng.choice([None, 200, 2000])
    cases = [(p, data) for p in partitions(tmp_path, "a.jsonl", data, rng.choice([700, 10**6]))]
    blob = gzip.compress(data)
    cases += [(partitions(tmp_path, "b.jsonl.gz", blob[: -rng.randint(0, 30)], 10**6)[0], data)]
    for part, stream in cases:
        for event in line_blocks(part, rng.choice([1, 100, 5000]), limit):
            if isinstance(event, Block):
                assert stream[event.offset : event.offset + len(event.data)] == event.data
                assert event.offset in (0, len(BOM)) or stream[event.offset - 1] == ord("\n")
            elif isinstance(event, LongLine):
                line = stream[event.offset :].split(b"\n", 1)[0]
                assert len(line) == event.nbytes
                assert event.offset == 0 or stream[event.offset - 1] == ord("\n")
            else:
                assert event.offset == 0 or stream[event.offset - 1] == ord("\n")


def test_a_stream_broken_inside_a_long_line(tmp_path: Path) -> None:
    data = b'{"text": "a"}\n' + b"z" * 100_000
    blob = gzip.compress(data)[:-20]  # cut: the last line never ends
    [part] = partitions(tmp_path, "a.jsonl.gz", blob, 1000)
    *lines, broken = blocks(part, 100, 1000)
    assert lines == [b'{"text": "a"}\n']
    assert isinstance(broken, Broken) and broken.partial_bytes > 1000

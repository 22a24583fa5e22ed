"""Splitting inputs into partitions, in a stable order that depends only on the inputs.

A partition is the unit of work and of resume: its index names its shards, so
the same inputs and target size must always give the same partitions, whatever
the number of workers. Plain JSONL is cut into byte ranges at line starts
(balanced, about target_bytes each) and the number of each range's first line is
found by counting newlines, so derived ids (`name:line`) do not depend on the
split. Compressed JSONL cannot be split, nor can a CSV file (a quoted value may hold a
newline, so rows are not lines) or a single text file (one document).
Columnar inputs and folders are cut
between their natural pieces (row groups, record batches, shards, files), joined
greedily up to target_bytes, with each partition's first row counted so derived
ids (`name:row`) stay stable too.
"""

from __future__ import annotations

import io
import itertools
import os
from dataclasses import dataclass

from curate.errors import CurateError
from curate.io import columnar, folders
from curate.io.inputs import InputFile

_COUNT_CHUNK = 1 << 20
_SCAN = 1 << 16


@dataclass(frozen=True)
class Partition:
    """A piece of one input, read and written on its own."""

    index: int  # position in the global stable order, 0..n-1
    input: InputFile
    start: int  # jsonl: byte offset; parquet: row group; arrow: record batch; folders: member
    stop: int  # exclusive end in the same unit
    first_line: int = 1  # jsonl (uncompressed): 1-based number of the first line in [start, stop)
    first_row: int = 0  # 0-based row of the partition's first document within its input


def plan_partitions(inputs: list[InputFile], target_bytes: int) -> list[Partition]:
    """Every input's partitions, inputs in order; an input always has at least one."""
    if target_bytes < 1:
        raise ValueError(f"target_bytes must be positive, not {target_bytes}")
    parts: list[Partition] = []
    for inp in inputs:
        for start, stop, first_line, first_row in _plan(inp, target_bytes):
            parts.append(Partition(len(parts), inp, start, stop, first_line, first_row))
    return parts


def _plan(inp: InputFile, target: int) -> list[tuple[int, int, int, int]]:
    if inp.format == "jsonl":
        return [(a, b, line, 0) for a, b, line in split_jsonl(inp, target)]
    if inp.format in ("jsonl.gz", "jsonl.zst", "csv", "tsv", "text_file"):
        return [(0, inp.size, 1, 0)]
    if inp.format == "text_folder":
        members = folders.members_of(inp.path, inp.format, inp.size, inp.mtime_ns, inp.name)
        units = [(m.size, 1) for m in members]
    else:
        units = columnar.units(inp)
    return [(a, b, 1, row) for a, b, row in group(units, target)]


def group(units: list[tuple[int, int]], target: int) -> list[tuple[int, int, int]]:
    """Consecutive (bytes, rows) units joined up to target bytes: (start, stop, first_row)."""
    out = []
    start = acc = row = first_row = 0
    for i, (nbytes, rows) in enumerate(units):
        if i > start and acc + nbytes > target:
            out.append((start, i, first_row))
            start, acc, first_row = i, 0, row
        acc += nbytes
        row += rows
    out.append((start, len(units), first_row))
    return out


def split_jsonl(inp: InputFile, target: int) -> list[tuple[int, int, int]]:
    """Byte ranges of a JSONL file starting at line starts: (start, stop, first_line)."""
    size = inp.size
    if size <= target:
        return [(0, size, 1)]
    n = -(-size // target)
    bounds = [0]
    try:
        with open(inp.path, "rb") as f:
            if os.fstat(f.fileno()).st_size != size:
                raise CurateError(f"{inp.label} changed size since inputs were listed; run again")
            for k in range(1, n):
                if k * size // n <= bounds[-1]:  # inside the line that made the last bound:
                    continue  # its first line start is that bound (a huge line, scanned once)
                b = _line_start(f, k * size // n)
                if bounds[-1] < b < size:
                    bounds.append(b)
            bounds.append(size)
            firsts = [1]
            f.seek(0)
            for a, b in itertools.pairwise(bounds[:-1]):
                firsts.append(firsts[-1] + _newlines(f, b - a))
    except OSError as exc:
        raise CurateError(f"{inp.label} cannot be read: {exc.strerror or exc}") from None
    return list(zip(bounds[:-1], bounds[1:], firsts, strict=True))


def _line_start(f: io.BufferedReader, offset: int) -> int:
    """The first line start at or after offset."""
    f.seek(offset - 1)
    if f.read(1) == b"\n":
        return offset
    while piece := f.read(_SCAN):
        cut = piece.find(b"\n")
        if cut >= 0:
            return f.tell() - len(piece) + cut + 1
    return f.tell()


def _newlines(f: io.BufferedReader, nbytes: int) -> int:
    """Newlines in the next nbytes of f, counted in C a chunk at a time."""
    count = 0
    buf = bytearray(_COUNT_CHUNK)
    while nbytes > 0:
        n = f.readinto(memoryview(buf)[: min(_COUNT_CHUNK, nbytes)])
        if not n:
            break
        count += (buf if n == _COUNT_CHUNK else buf[:n]).count(b"\n")
        nbytes -= n
    return count

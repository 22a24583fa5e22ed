"""Splitting inputs into partitions, in a stable order that depends only on the inputs.

A partition is the unit of work and of resume: its key (`curate.io.partition_key`: the
input's name and the range it covers) names its shards and staged files, so the same
inputs and target size must always give the same partitions, whatever the number of
workers; its index (its place in this run's plan) is for this run only. Plain JSONL is
cut into byte ranges at line starts
(balanced, about target_bytes each), each found by seeking to its target offset and
reading on to the next newline: planning reads kilobytes per partition, not the
file, and counts no lines, because derived ids of plain JSONL are byte offsets
(`name@offset`, the same whatever the split; line numbers are counted only when a
message needs one: `curate.io.line_numbers`); a build keeps them in a `PlanCache`.
Compressed JSONL cannot be split,
nor can a JSON array (where a record begins is known only by reading all before it), a
CSV file (a quoted value may hold a newline, so rows are not lines) or a single text file
(one document). Columnar inputs and folders are cut between their
natural pieces (row groups, record batches, shards, files), joined greedily up to
target_bytes, with each partition's first row counted so derived ids (`name:row`)
stay stable too.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from functools import cached_property

from curate.errors import CurateError
from curate.io import columnar, folders
from curate.io.inputs import InputFile
from curate.io.partition_key import partition_key, unit_of
from curate.io.plan_cache import PlanCache

_FIRST_WINDOW = 4096  # bytes read at a boundary first: most lines end within them
_MAX_WINDOW = 1 << 20  # windows double up to this while a long line goes on


@dataclass(frozen=True)
class Partition:
    """A piece of one input, read and written on its own."""

    index: int  # position in this run's plan (input order), 0..n-1: in memory only, never stored
    input: InputFile
    start: int  # jsonl: byte offset; parquet: row group; arrow: record batch; folders: member
    stop: int  # exclusive end in the same unit
    first_row: int = 0  # 0-based row of the partition's first document within its input

    @property
    def unit(self) -> str:
        """What `start` and `stop` count (`curate.io.partition_key.UNITS`)."""
        return unit_of(self.input.format)

    @cached_property
    def key(self) -> str:
        """The partition's identity, which every name it leaves on disk carries."""
        return partition_key(self.input.name, self.unit, self.start, self.stop)


def plan_partitions(
    inputs: list[InputFile], target_bytes: int, cache: PlanCache | None = None
) -> list[Partition]:
    """Every input's partitions, inputs in order; an input always has at least one. Plain
    JSONL boundaries come from `cache` when it has them, and go into it."""
    if target_bytes < 1:
        raise ValueError(f"target_bytes must be positive, not {target_bytes}")
    parts: list[Partition] = []
    for inp in inputs:
        for start, stop, first_row in _plan(inp, target_bytes, cache):
            parts.append(Partition(len(parts), inp, start, stop, first_row))
    keys: dict[str, Partition] = {}
    for part in parts:
        other = keys.setdefault(part.key, part)
        if other is not part:
            raise CurateError(
                f"{part.input.label} and {other.input.label} give two partitions one key "
                f"({part.key}); name each input once"
            )
    return parts


def _plan(inp: InputFile, target: int, cache: PlanCache | None) -> list[tuple[int, int, int]]:
    if inp.format == "jsonl":
        known = cache.bounds(inp, target) if cache is not None else None
        ranges = list(itertools.pairwise(known)) if known else split_jsonl(inp, target)
        if cache is not None and len(ranges) > 1:
            cache.keep(inp, target, [0, *(b for _, b in ranges)])
        return [(a, b, 0) for a, b in ranges]
    if inp.format in ("jsonl.gz", "jsonl.zst", "json", "csv", "tsv", "text_file"):
        return [(0, inp.size, 0)]
    if inp.format == "text_folder":
        members = folders.members_of(inp.path, inp.format, inp.size, inp.mtime_ns, inp.name)
        units = [(m.size, 1) for m in members]
    else:
        units = columnar.units(inp)
    return list(group(units, target))


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


def split_jsonl(inp: InputFile, target: int) -> list[tuple[int, int]]:
    """Byte ranges of a JSONL file, each starting at a line start: (start, stop)."""
    size = inp.size
    if size <= target:
        return [(0, size)]
    n = -(-size // target)
    bounds = [0]
    try:
        with open(inp.path, "rb", buffering=0) as f:
            if os.fstat(f.fileno()).st_size != size:
                raise CurateError(f"{inp.label} changed size since inputs were listed; run again")
            for k in range(1, n):
                if k * size // n <= bounds[-1]:  # inside the line that made the last bound:
                    continue  # its first line start is that bound (a huge line, scanned once)
                b = _line_start(f.fileno(), k * size // n, size)
                if bounds[-1] < b < size:
                    bounds.append(b)
    except OSError as exc:
        raise CurateError(f"{inp.label} cannot be read: {exc.strerror or exc}") from None
    bounds.append(size)
    return list(itertools.pairwise(bounds))


def _line_start(fd: int, offset: int, size: int) -> int:
    """The first line start at or after offset (size if none), read in windows from offset - 1
    that start small and double: a few kilobytes for lines of ordinary length."""
    at, window = offset - 1, _FIRST_WINDOW
    while at < size:
        piece = os.pread(fd, window, at)
        if not piece:
            break
        cut = piece.find(b"\n")
        if cut >= 0:
            return at + cut + 1
        at += len(piece)
        window = min(2 * window, _MAX_WINDOW)
    return size

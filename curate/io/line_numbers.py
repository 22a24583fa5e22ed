"""How many lines come before a plain JSONL partition, counted only when a message needs it.

Derived ids of plain JSONL are byte offsets (`name@offset`), so neither planning nor a
clean partition counts lines. A quarantined record or a failing run still names its
true line (readers number a partition's lines from 1; `curate.io.records.ErrorSink`
adds this count): the first time a partition has one, the newlines before its start are
counted, in C, about 1 GB/s. Each worker process remembers the counts it made, so a
file with bad lines in every partition is counted about once per worker, not once per
partition; the memory holds counts of files as they were stat'ed, nothing read from disk.
"""

from __future__ import annotations

import bisect
import os
import threading

from curate.errors import CurateError
from curate.io.partitions import Partition

_CHUNK = 1 << 20
_FILES_KEPT = 64  # files whose counts a worker remembers; then it forgets them all

_lock = threading.Lock()
_known: dict[tuple[str, int, int, int], tuple[list[int], list[int]]] = {}
"""Per file (path, size, mtime, inode): offsets, sorted, and the newlines before each."""


def lines_before(part: Partition) -> int:
    """Lines of the partition's file before the first line the partition owns (the lines
    that start in [start, stop): a line begun before `start` is the previous partition's)."""
    inp, start = part.input, part.start
    if start == 0:
        return 0
    key = (inp.path, inp.size, inp.mtime_ns, inp.inode)
    with _lock:
        offsets, counts = _known.get(key, ([0], [0]))
        i = bisect.bisect_right(offsets, start) - 1
        at, count = offsets[i], counts[i]
    try:
        with open(inp.path, "rb", buffering=0) as f:
            count += _newlines(f.fileno(), at, start)
            begun = os.pread(f.fileno(), 1, start - 1) != b"\n"  # start is inside a line
    except OSError as exc:
        raise CurateError(f"{inp.name} cannot be read: {exc.strerror or exc}") from None
    with _lock:
        if key not in _known and len(_known) >= _FILES_KEPT:
            _known.clear()
        offsets, counts = _known.setdefault(key, ([0], [0]))
        i = bisect.bisect_left(offsets, start)
        if i == len(offsets) or offsets[i] != start:
            offsets.insert(i, start)
            counts.insert(i, count)
    return count + begun


def _newlines(fd: int, start: int, stop: int) -> int:
    """Newlines in bytes [start, stop) of a file, counted in C a chunk at a time."""
    count = 0
    while start < stop:
        piece = os.pread(fd, min(_CHUNK, stop - start), start)
        if not piece:
            break
        count += piece.count(b"\n")
        start += len(piece)
    return count

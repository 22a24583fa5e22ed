"""Where the lines of a JSONL block are, found with one vectorised pass over its bytes.

The fast path needs to know, without a Python loop per line, how many lines a
block has, which are blank (Arrow skips those, so rows map to the others), and
whether every other line starts with `{`: Arrow's JSON reader crashes on a block
whose first value is a top-level `null` (apache/arrow#47409), and any line that
does not start with `{` is bad anyway, so such lines are sent to the slow path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

WS = b" \t\r"  # JSON whitespace within a line


@dataclass
class Lines:
    """A block of whole lines and where each one starts."""

    block: bytes
    first: int  # number of the block's first line
    base: int  # where the block starts in its input (a byte offset)
    count: int
    numbers: Sequence[int]  # numbers of the non-blank lines
    odd: int | None  # number of the first non-blank line not starting with `{`, if any
    _newlines: Any  # numpy array of the positions of b"\n"

    @property
    def end(self) -> int:
        """Number of the line after the block."""
        return self.first + self.count

    def offset(self, number: int) -> int:
        """Where line `number` starts in the block (its length for the line after the block)."""
        i = number - self.first
        if i <= 0:
            return 0
        if i > len(self._newlines):
            return len(self.block)
        return int(self._newlines[i - 1]) + 1

    def where(self, number: int) -> int:
        """Where line `number` starts in the input."""
        return self.base + self.offset(number)

    def starts(self, numbers: Sequence[int]) -> Any:
        """Where each of these lines starts in the input, as a numpy array."""
        import numpy as np

        firsts = np.concatenate(([0], self._newlines + 1))
        return self.base + firsts[np.asarray(numbers, np.int64) - self.first]

    def raw(self, number: int) -> bytes:
        """One line without its newline."""
        line = self.block[self.offset(number) : self.offset(number + 1)]
        return line[:-1] if line.endswith(b"\n") else line

    def span(self, start: int, stop: int) -> Lines:
        """Lines start..stop-1 as a block of their own."""
        at = self.offset(start)
        return scan(self.block[at : self.offset(stop)], start, self.base + at)

    def split(self) -> list[bytes]:
        lines = self.block.split(b"\n")
        if self.block.endswith(b"\n"):
            lines.pop()
        return lines


def scan(block: bytes, first: int, base: int) -> Lines:
    import numpy as np

    data = np.frombuffer(block, np.uint8)
    newlines = np.flatnonzero(data == 10)
    count = len(newlines) + (0 if block.endswith(b"\n") or not block else 1)
    starts = data[newlines[newlines + 1 < len(data)] + 1]
    # the common case: the block starts with `{` and so does every line after a newline
    if block[:1] == b"{" and bool((starts == 123).all()):
        return Lines(block, first, base, count, range(first, first + count), None, newlines)
    numbers = []
    odd = None
    for i, line in enumerate(block.split(b"\n")[:count]):
        content = line.strip(WS)
        if content:
            numbers.append(first + i)
            if odd is None and not content.startswith(b"{"):
                odd = first + i
    return Lines(block, first, base, count, numbers, odd, newlines)


def invalid_utf8_at(block: bytes) -> int | None:
    """Offset of the first byte that is not valid UTF-8, or None; checked in C at GB/s."""
    if block.isascii():
        return None
    offsets = pa.array([0, len(block)], pa.int64()).buffers()[1]
    arr = pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, pa.py_buffer(block)])
    try:
        arr.cast(pa.large_string())
        return None
    except pa.ArrowInvalid:
        pass
    try:
        block.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start
    return None

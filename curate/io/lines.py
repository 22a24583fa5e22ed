"""The lines of a JSONL partition, in blocks, never holding a line longer than a bound.

Both JSONL readers (text: `curate.io.jsonl`; chat: `curate.chat.reader`) read their lines
here, so what a partition owns, the byte-order mark and a line too long to hold are
decided once. A plain file's partition owns the lines that start in [start, stop): a
line begun before `start` is skipped, the one begun before `stop` is read to its end, so
consecutive partitions read each line exactly once. A compressed file is one partition.

Bytes arrive in pieces (reads of a plain file, output of a decompressor) and leave as
`Block`s of whole lines, cut where the readers have always cut them, so batches are the
same as before lines had a bound. A line of more than `max_line_bytes` (the recipe's
`max_document_bytes`: a line holds its document and more) is never held: once it is
seen to be too long, what was kept of it is dropped and the rest is only scanned for
its end, and a `LongLine` takes its place. Line numbers are the reader's to count (the
text reader counts a block's lines as it parses it; counting here would cost a second
pass over every byte): a `LongLine` is one line, a `Broken` comes where a line starts.
Each event says where it starts (`offset`: in the file for plain JSONL, in the
decompressed stream for a compressed one), which names a plain file's derived ids.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from curate.io.compressed import StreamBroken, decompressed
from curate.io.partitions import Partition
from curate.io.records import LineIds

BOM = b"\xef\xbb\xbf"
"""The UTF-8 byte-order mark: dropped at the start of an input (a JSONL file, a text file)."""

JSONL_FORMATS = ("jsonl", "jsonl.gz", "jsonl.zst")

_SCAN = 1 << 16  # bytes read at a time past a partition's end, to finish its last line


@dataclass(frozen=True)
class Block:
    """Whole lines, each ending in a newline (the input's last line may not)."""

    data: bytes
    offset: int  # where data[0] is (after a byte-order mark, which is not in data)


@dataclass(frozen=True)
class LongLine:
    """A line over the bound, not read: its length in bytes, without the newline."""

    nbytes: int
    offset: int  # where the line starts


@dataclass(frozen=True)
class Broken:
    """The cut or damaged end of a compressed stream: no lines follow."""

    reason: str
    lost_bytes: int  # compressed bytes that could not be decoded
    partial_bytes: int  # bytes of the unfinished line the stream ended in
    offset: int  # where that line starts


Event = Block | LongLine | Broken


def line_blocks(
    part: Partition, batch_bytes: int, max_line_bytes: int | None = None
) -> Iterator[Event]:
    """The partition's lines as blocks of about batch_bytes, over-long lines set apart."""
    limit = sys.maxsize if max_line_bytes is None else max_line_bytes
    if part.input.format == "jsonl":
        return _range(part.input.path, part.start, part.stop, batch_bytes, limit)
    return _stream(part.input.path, part.input.format, batch_bytes, limit)


def line_ids(part: Partition) -> LineIds:
    """How the partition's records without an id are named: by offset in a plain file."""
    return LineIds(part.input.name, by_offset=part.input.format == "jsonl")


def split_lines(data: bytes) -> Iterator[bytes]:
    """A block's lines, each with its newline (the last one may have none)."""
    start = 0
    while (end := data.find(b"\n", start) + 1) > 0:
        yield data[start:end]
        start = end
    if start < len(data):
        yield data[start:]


def _range(path: str, start: int, stop: int, batch_bytes: int, limit: int) -> Iterator[Event]:
    """A byte range of a plain file, cut at every read that holds a newline."""
    with open(path, "rb") as f:
        if start > 0:
            f.seek(start - 1)
            if f.read(1) != b"\n":  # start is inside a line: it belongs to the previous range
                _skip_line(f)
        pos = f.tell()
        cutter = _Cutter(limit, min_block=0, bom=start == 0, offset=pos)
        while pos < stop:
            chunk = f.read(min(batch_bytes, stop - pos))
            if not chunk:
                break
            pos += len(chunk)
            yield from cutter.feed(chunk)
        while cutter.mid_line and (piece := f.read(_SCAN)):  # the last line, to its end
            end = piece.find(b"\n") + 1
            yield from cutter.feed(piece[:end] if end else piece)
            if end:
                break
    yield from cutter.finish()


def _skip_line(f: BinaryIO) -> None:
    """Move past the next newline (or to the end of the file), holding nothing."""
    while piece := f.read(_SCAN):
        end = piece.find(b"\n") + 1
        if end:
            f.seek(end - len(piece), 1)
            return


def _stream(path: str, fmt: str, batch_bytes: int, limit: int) -> Iterator[Event]:
    """A whole compressed file, cut once batch_bytes are held and a piece brings a newline."""
    cutter = _Cutter(limit, min_block=batch_bytes, bom=True, offset=0)
    try:
        for piece in decompressed(path, fmt):
            yield from cutter.feed(piece)
    except StreamBroken as broken:
        yield from cutter.broken(broken.reason, broken.lost_bytes)
        return
    yield from cutter.finish()


class _Cutter:
    """Pieces of bytes in, whole-line blocks out, lines over `limit` set apart unheld.

    A block is given out when a piece holding a newline arrives and at least `min_block`
    bytes are held: the whole lines held, up to that piece's last newline.
    """

    def __init__(self, limit: int, min_block: int, bom: bool, offset: int) -> None:
        self.limit = limit
        self.offset = offset  # where the first byte held (or the line being skipped) is
        self.min_block = min_block
        self.bom = bom  # the input's first bytes are still to come: a BOM there is dropped
        self.whole: list[bytes | memoryview] = []  # whole lines held
        self.tail: list[bytes] = []  # the line begun after them
        self.held = 0  # bytes in whole and tail
        self.tail_bytes = 0
        self.skipped = -1  # while skipping a line over the limit: its bytes so far

    @property
    def mid_line(self) -> bool:
        """Whether a line has begun and not ended."""
        return self.tail_bytes > 0 or self.skipped >= 0

    def feed(self, piece: bytes) -> Iterator[Event]:
        at = 0
        while at < len(piece):
            if self.skipped >= 0:
                end = piece.find(b"\n", at)
                if end < 0:
                    self.skipped += len(piece) - at
                    return
                yield from self._long(self.skipped + end - at)
                at = end + 1
                continue
            long = _long_line(piece, at, self.limit, self.tail_bytes)
            if long is None:
                yield from self._take(piece, at)
                return
            # the lines before the long one leave as a block; the long one is dropped
            if long > at:
                self.whole += [*self.tail, memoryview(piece)[at:long]]
                self.held += long - at
                self.skipped = 0
            else:  # it began before this piece
                self.held -= self.tail_bytes
                self.skipped = self.tail_bytes
            self.tail, self.tail_bytes = [], 0
            yield from self._block()
            at = long

    def finish(self) -> Iterator[Event]:
        """The end of the input: what is held, and a long line that ran to the end."""
        if self.skipped >= 0:
            yield from self._long(self.skipped)
            return
        self.whole += self.tail
        self.tail, self.tail_bytes = [], 0
        yield from self._block()

    def broken(self, reason: str, lost_bytes: int) -> Iterator[Event]:
        """The stream broke: the whole lines held, then where it broke."""
        partial = self.skipped if self.skipped >= 0 else self.tail_bytes
        yield from self._block()
        self.bom = False
        yield Broken(reason, lost_bytes, partial, self.offset)

    def _take(self, piece: bytes, at: int) -> Iterator[Event]:
        """A piece (from `at`) with no line over the limit: held, and cut as before."""
        size = len(piece) - at
        self.held += size
        cut = piece.rfind(b"\n", at) + 1
        if not cut:
            self.tail.append(piece[at:] if at else piece)
            self.tail_bytes += size
            return
        if at == 0 and cut == len(piece) and not self.tail:
            self.whole.append(piece)
        else:
            self.whole += [*self.tail, memoryview(piece)[at:cut]]
        self.tail = [piece[cut:]] if cut < len(piece) else []
        self.tail_bytes = len(piece) - cut
        if self.held >= self.min_block:
            yield from self._block()

    def _block(self) -> Iterator[Event]:
        if not self.whole:
            return
        if len(self.whole) == 1 and isinstance(self.whole[0], bytes):
            data = self.whole[0]
        else:
            data = b"".join(self.whole)
        self.whole = []
        self.held -= len(data)
        offset = self.offset
        self.offset += len(data)
        if self.bom:
            self.bom = False
            if data.startswith(BOM):
                data = data[len(BOM) :]
                offset += len(BOM)
        yield Block(data, offset)

    def _long(self, nbytes: int) -> Iterator[Event]:
        self.skipped = -1
        self.bom = False
        offset = self.offset
        self.offset += nbytes + 1  # and its newline (if it ran to the end, nothing follows)
        yield LongLine(nbytes, offset)


def _long_line(data: bytes, at: int, limit: int, held: int) -> int | None:
    """Where the first line of data[at:] longer than limit starts, or None; `held` bytes of
    the first line came before `at`.

    Looks for the last newline of each window of limit + 1 bytes, so a block of short
    lines costs one backward search per window, not one per line."""
    room = limit - held  # what the line from `at` may still hold
    while at + room < len(data):
        end = data.rfind(b"\n", at, at + room + 1)
        if end < 0:
            return at
        at, room = end + 1, limit
    return None

"""Reading JSONL partitions: a byte range of a plain file, or a whole compressed file.

Both are cut into blocks of whole lines of about batch_bytes, each parsed by
`BlockParser`; line numbers advance by counting newlines, so every record and
every quarantined line is named by its physical 1-based line number. A partition
owns the lines that start in [start, stop): the reader skips a line begun before
`start` and finishes the one begun before `stop`, so consecutive partitions read
each line exactly once wherever their boundaries fall.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from curate.errors import CurateError
from curate.io.batches import FieldSpec, ReadChunk
from curate.io.compressed import StreamBroken, decompressed
from curate.io.jsonl_block import BlockParser
from curate.io.partitions import Partition
from curate.io.records import ErrorSink

_BOM = b"\xef\xbb\xbf"
_SCAN = 1 << 16


def read_jsonl(
    part: Partition, fields: FieldSpec, sink: ErrorSink, batch_bytes: int, use_threads: bool
) -> Iterator[ReadChunk]:
    parser = BlockParser(part.input.name, fields, sink, use_threads)
    line = part.first_line
    blocks: Iterator[bytes | _Broken]
    try:
        if part.input.format == "jsonl":
            blocks = _range_blocks(part.input.path, part.start, part.stop, batch_bytes)
        else:
            blocks = _stream_blocks(part.input.path, part.input.format, batch_bytes)
        for i, block in enumerate(blocks):
            if isinstance(block, _Broken):
                nbytes = len(block.partial) or block.lost_bytes
                sink.bad(line, block.reason, nbytes)
                yield ReadChunk(parser.parse(b"", line)[0], sink.take())
                return
            if i == 0 and part.start == 0 and block.startswith(_BOM):
                block = block[len(_BOM) :]
            batch, lines = parser.parse(block, line)
            line += lines
            quarantined = sink.take()
            if batch.num_rows or quarantined:
                yield ReadChunk(batch, quarantined)
    except OSError as exc:
        raise CurateError(f"{part.input.name} cannot be read: {exc.strerror or exc}") from None


def _range_blocks(path: str, start: int, stop: int, batch_bytes: int) -> Iterator[bytes]:
    with open(path, "rb") as f:
        if start > 0:
            f.seek(start - 1)
            if f.read(1) != b"\n":  # start is inside a line: it belongs to the previous range
                _to_line_end(f)
        pos = f.tell()
        rest: list[bytes] = []  # a line begun in earlier chunks (kept as parts: lines may be huge)
        while pos < stop:
            chunk = f.read(min(batch_bytes, stop - pos))
            if not chunk:
                break
            pos += len(chunk)
            cut = chunk.rfind(b"\n") + 1
            if not cut:
                rest.append(chunk)
            elif cut == len(chunk) and not rest:
                yield chunk
            else:  # one copy: the carried partial line plus this chunk's whole lines
                yield b"".join((*rest, memoryview(chunk)[:cut]))
                rest = [chunk[cut:]] if cut < len(chunk) else []
        if rest:  # the last line started before stop: read it to its end
            yield b"".join((*rest, _to_line_end(f)))


def _to_line_end(f: BinaryIO) -> bytes:
    """Read up to and including the next newline (or to the end of the file)."""
    parts = []
    while piece := f.read(_SCAN):
        cut = piece.find(b"\n")
        if cut >= 0:
            parts.append(piece[: cut + 1])
            f.seek(cut + 1 - len(piece), 1)
            break
        parts.append(piece)
    return b"".join(parts)


@dataclass
class _Broken:
    """The end of a cut or damaged compressed stream, and the unfinished line it left."""

    reason: str
    lost_bytes: int
    partial: bytes


def _stream_blocks(path: str, fmt: str, batch_bytes: int) -> Iterator[bytes | _Broken]:
    """Whole-line blocks of a compressed file; a cut or damaged stream ends with a `_Broken`."""
    pieces: list[bytes] = []
    size = 0
    try:
        for piece in decompressed(path, fmt):
            pieces.append(piece)
            size += len(piece)
            if size >= batch_bytes and b"\n" in piece:
                buf = b"".join(pieces)
                cut = buf.rfind(b"\n") + 1
                yield buf[:cut]
                pieces, size = [buf[cut:]], len(buf) - cut
    except StreamBroken as broken:
        buf = b"".join(pieces)
        cut = buf.rfind(b"\n") + 1
        if cut:
            yield buf[:cut]
        yield _Broken(broken.reason, broken.lost_bytes, buf[cut:])
        return
    buf = b"".join(pieces)
    if buf:
        yield buf

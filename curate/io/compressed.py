"""Decompressing .gz and .zst inputs, telling a complete stream from a cut or damaged one.

`gzip.open` raises on a truncated file but `zstandard`'s stream reader returns
the truncated output as if it were complete; a copy cut short must never pass
for the whole file. So both formats are decoded here with decompression objects
whose end-of-stream flag is checked, frame after frame (concatenated gzip members
and zstd frames are read as one stream, as the command-line tools do).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

from curate.reasons import CORRUPT_STREAM, TRUNCATED_STREAM

_IN_CHUNK = 1 << 18  # compressed bytes fed per call
_OUT_MAX = 16 << 20  # cap on the output of one call, against decompression bombs
_ZSTD_STEP = 512  # compressed bytes per zstd call: at most 16 MiB out, so a piece is < 32 MiB


class StreamBroken(Exception):
    """The stream ended early or could not be decoded; everything before it was yielded."""

    def __init__(self, reason: str, lost_bytes: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.lost_bytes = lost_bytes  # compressed bytes that could not be decoded


def decompressed(path: str, fmt: str) -> Iterator[bytes]:
    """The decompressed bytes of a .jsonl.gz or .jsonl.zst file, piece by piece."""
    kind = "gzip" if fmt.endswith("gz") else "zstd"
    with open(path, "rb") as f:
        yield from _decode(f, kind)


def _new(kind: str) -> Any:
    if kind == "gzip":
        return zlib.decompressobj(wbits=31)
    import zstandard

    return zstandard.ZstdDecompressor().decompressobj()


def _decode(f: Any, kind: str) -> Iterator[bytes]:
    d = _new(kind)
    errors: tuple[type[Exception], ...] = (zlib.error,)
    if kind == "zstd":
        import zstandard

        errors = (zstandard.ZstdError,)
    fed = 0  # compressed bytes read from the file so far
    started = False  # whether the current member/frame has been fed anything
    while data := f.read(_IN_CHUNK):
        at = fed
        fed += len(data)
        while True:
            started = started or bool(data)
            try:
                if kind == "gzip":
                    out = d.decompress(data, _OUT_MAX)
                    # at a member's end the rest is unused_data (after a capped call zlib
                    # leaves it in unconsumed_tail too: reading both read it twice, forever)
                    data = d.unused_data if d.eof else d.unconsumed_tail
                else:
                    out, data = _zstd(d, data)
            except errors:
                reason = CORRUPT_STREAM(codec=kind, offset=at)  # not the library's words
                raise StreamBroken(reason, _size(f) - at) from None
            if out:
                yield out
            if d.eof:  # a member/frame ended; what follows starts the next one
                d, started = _new(kind), False
                if data:
                    continue
                break
            # output capped with input left, or with more output still inside zlib
            if not (data or (kind == "gzip" and len(out) == _OUT_MAX)):
                break
    if started:
        raise StreamBroken(TRUNCATED_STREAM(codec=kind, offset=fed), 0)


def _zstd(d: Any, data: bytes) -> tuple[bytes, bytes]:
    """What `data` decodes to, fed _ZSTD_STEP bytes at a time until it is used up, the
    frame ends or _OUT_MAX bytes came out; and the input left (after the frame's end, it
    is the next frame's). zstd's decoder has no output cap, and 4 bytes may encode a block
    of 128 KiB: fed whole, one 256 KiB read could come out as 8 GiB."""
    outs = []
    size = at = 0
    view = memoryview(data)
    while at < len(data):
        out = d.decompress(view[at : at + _ZSTD_STEP])
        at += _ZSTD_STEP
        if out:
            outs.append(out)
            size += len(out)
        if d.eof:
            return b"".join(outs), d.unused_data + data[at:]
        if size >= _OUT_MAX:
            break
    return b"".join(outs), data[at:]


def _size(f: Any) -> int:
    import os

    return os.fstat(f.fileno()).st_size

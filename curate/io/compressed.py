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
_OUT_MAX = 16 << 20  # cap on gzip output per call, against decompression bombs


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
                    data = d.unconsumed_tail
                else:
                    out, data = d.decompress(data), b""
            except errors:
                reason = CORRUPT_STREAM(codec=kind, offset=at)  # not the library's words
                raise StreamBroken(reason, _size(f) - at) from None
            if out:
                yield out
            if d.eof:  # a member/frame ended; what follows starts the next one
                data = d.unused_data + data
                d, started = _new(kind), False
                if data:
                    continue
                break
            # gzip output capped with input left, or with more output still inside zlib
            if not (data or (kind == "gzip" and len(out) == _OUT_MAX)):
                break
    if started:
        raise StreamBroken(TRUNCATED_STREAM(codec=kind, offset=fed), 0)


def _size(f: Any) -> int:
    import os

    return os.fstat(f.fileno()).st_size

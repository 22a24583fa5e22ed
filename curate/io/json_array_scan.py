"""Cutting a `.json` file holding one array of records into its records, a chunk at a time.

The cutter does not parse values: it finds where each record of the top-level array begins
and ends, following strings (a quote not escaped by an odd run of backslashes opens or
closes one), brackets and commas outside them, with one vectorised pass over each chunk's
bytes and a Python step per record. Each record then goes, as one line, to the JSONL
parsers (Arrow's JSON reader, `json.loads` for the few it rejects), so a record is judged
exactly as a JSONL line is, and a bad record costs only itself: a record that is not JSON
does not stop the reading of the ones after it, and a file that ends inside a record loses
that record only.

A record over the bound (`max_document_bytes`, its bytes as written) is never held: once
it is seen to be too long its bytes are only scanned for its end. Nesting costs a counter,
not a stack. Incremental parsers were measured for this (ijson 3.6 with yajl2_c): a record
of 100,000 nested arrays took the process to the kernel's out-of-memory kill (each event
carries its whole path as a string), one byte of invalid UTF-8 ended the reading of the
whole file, and a 1 GiB string was held whole before any bound could apply.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from curate.io.lines import BOM
from curate.reasons import (
    CONTENT_AFTER_ARRAY,
    DOCUMENT_TOO_LARGE,
    EMPTY_RECORD,
    LINE_BREAK_IN_STRING,
    TRUNCATED_ARRAY,
    TRUNCATED_RECORD,
)

WS = b" \t\n\r"  # JSON's whitespace

_QUOTE, _BACKSLASH, _OPEN, _CLOSE, _COMMA, _BREAK = 1, 2, 3, 4, 5, 6
_CODES = np.zeros(256, np.uint8)
_CODES[ord('"')] = _QUOTE
_CODES[ord("\\")] = _BACKSLASH
_CODES[[ord("["), ord("{")]] = _OPEN
_CODES[[ord("]"), ord("}")]] = _CLOSE
_CODES[ord(",")] = _COMMA
_CODES[[ord("\n"), ord("\r")]] = _BREAK
_ONE_LINE = bytes.maketrans(b"\n\r", b"  ")  # line breaks between tokens are whitespace

_KINDS = {ord("{"): "an object", ord('"'): "a string", ord("t"): "a boolean",
          ord("f"): "a boolean", ord("n"): "null"}  # fmt: skip


@dataclass(frozen=True)
class Record:
    """One record's bytes on one line (line breaks between its tokens made spaces)."""

    number: int  # 0-based, in the array
    offset: int  # where it begins in the file (its first byte other than whitespace)
    data: bytes


@dataclass(frozen=True)
class SetAside:
    """A record that is not parsed (too long, empty, cut short), or the file's unreadable end."""

    number: int
    reason: str
    nbytes: int
    offset: int


Event = Record | SetAside


class NotAnArray(Exception):
    """The file's top-level value is not an array: what it is instead."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


def top_level(head: bytes) -> str | None:
    """What the file starting with `head` holds when that is not an array, or None."""
    head = head.removeprefix(BOM).lstrip(WS)
    if not head:
        return "no JSON value (an empty file; write [] for no records)"
    if head[0] == ord("["):
        return None
    if head[0] in _KINDS:
        return f"{_KINDS[head[0]]}, not an array of records"
    if head[:1] in b"-0123456789":
        return "a number, not an array of records"
    return "not JSON (it does not start with [)"


class ArrayCutter:
    """Chunks of a JSON array file in, records out; records over `limit` bytes set aside unheld."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.state = "start"  # start (before [), inside, after (past the closing ])
        self.in_string = False
        self.escape_next = False  # the chunk before ended in an odd run of backslashes
        self.depth = 0  # 1 inside the array, between its records
        self.number = 0
        self.pieces: list[bytes] = []
        self.size = 0  # bytes of the current record so far (held or not)
        self.content = False  # the current record has a byte other than whitespace
        self.broken = False  # a raw line break inside one of its strings
        self.after = 0  # bytes other than whitespace after the closing ]
        self.first = True
        self.base = 0  # where the chunk being scanned begins in the file
        self.at = 0  # where the current record begins (its first byte other than whitespace)

    def feed(self, chunk: bytes) -> Iterator[Event]:
        yield from self._feed(chunk)
        self.base += len(chunk)

    def _feed(self, chunk: bytes) -> Iterator[Event]:
        at = 0
        if self.first:
            self.first = False
            at = len(BOM) if chunk.startswith(BOM) else 0
        if self.state == "start":
            stripped = chunk[at:].lstrip(WS)
            if not stripped:
                return
            problem = top_level(stripped)
            if problem is not None:
                raise NotAnArray(problem)
            at = len(chunk) - len(stripped) + 1
            self.state, self.depth = "inside", 1
        if self.state == "inside":
            yield from self._scan(chunk, at)
        else:
            self._after(chunk, at)

    def _after(self, chunk: bytes, at: int) -> None:
        """Bytes past the closing ]: only whitespace may follow."""
        rest = chunk[at:]
        if not self.after and rest.strip(WS):
            self.at = self.base + at + len(rest) - len(rest.lstrip(WS))
        self.after += len(rest.translate(None, WS))

    def finish(self) -> Iterator[Event]:
        """The end of the file: a record cut short, an array never closed, content after it."""
        if self.state == "start":
            raise NotAnArray(top_level(b"") or "")
        if self.state == "inside":
            if self.content and (self.depth > 1 or self.in_string):
                yield SetAside(self.number, TRUNCATED_RECORD(), self.size, self.at)
                return
            if self.content:  # a whole record, then no closing ]: the parser judges it
                yield from self._record(b"", 0, closing=False)
            yield SetAside(self.number, TRUNCATED_ARRAY(), 0, self.base)
        elif self.after:
            yield SetAside(self.number, CONTENT_AFTER_ARRAY(), self.after, self.at)

    def _scan(self, chunk: bytes, at: int) -> Iterator[Event]:
        data = np.frombuffer(chunk, np.uint8)[at:]
        codes_all = _CODES[data]
        where = np.flatnonzero(codes_all)
        codes = codes_all[where]
        escaped = self._escaped(where, codes, len(data))
        quote = (codes == _QUOTE) & ~escaped
        inside = (np.cumsum(quote) + self.in_string) % 2 == 1  # after each special byte
        outside = ~inside & ~quote
        step = np.where(outside & (codes == _OPEN), 1, 0) - np.where(
            outside & (codes == _CLOSE), 1, 0
        )
        depth = self.depth + np.cumsum(step)
        cut = outside & (((codes == _COMMA) & (depth == 1)) | ((codes == _CLOSE) & (depth == 0)))
        breaks = where[inside & (codes == _BREAK)] + at  # raw line breaks inside strings
        cuts = where[cut] + at
        starts = np.concatenate([[at], cuts + 1])
        # whether each piece (up to each cut, then the rest) holds such a break
        broken = np.searchsorted(breaks, np.append(cuts, len(chunk))) > np.searchsorted(
            breaks, starts
        )
        for i, pos in enumerate(cuts.tolist()):
            self.broken |= bool(broken[i])
            closing = chunk[pos] != ord(",")
            yield from self._record(chunk[int(starts[i]) : pos], int(starts[i]), closing)
            if closing:
                self.state = "after"
                self._after(chunk, pos + 1)
                return
        if len(where):
            self.in_string = bool(inside[-1])
            self.depth = int(depth[-1])
        self.broken |= bool(broken[-1])
        self._hold(chunk[int(starts[-1]) :], int(starts[-1]))

    def _escaped(self, where: np.ndarray, codes: np.ndarray, n: int) -> np.ndarray:
        """Which special bytes follow an odd run of backslashes (so a quote there is text);
        sets `escape_next` for the chunk after."""
        escaped = np.zeros(len(where), bool)
        slashes = where[codes == _BACKSLASH]
        if self.escape_next and len(where) and where[0] == 0:
            escaped[0] = True  # escaped by the chunk before: not the start of a run
            if codes[0] == _BACKSLASH:
                slashes = slashes[1:]
        self.escape_next = False
        if not len(slashes):
            return escaped
        breaks = np.flatnonzero(np.diff(slashes) != 1) + 1
        starts = slashes[np.concatenate([[0], breaks])]
        lengths = np.diff(np.concatenate([[0], breaks, [len(slashes)]]))
        targets = (starts + lengths)[lengths % 2 == 1]  # the byte after an odd run
        escaped |= np.isin(where, targets)
        self.escape_next = bool(len(targets) and targets[-1] == n)
        return escaped

    def _hold(self, piece: bytes, at: int) -> None:
        """Bytes of the current record (`at` in the chunk), kept while it is within the bound."""
        if not piece:
            return
        self.size += len(piece)
        if not self.content and (stripped := piece.lstrip(WS)):
            self.content = True
            self.at = self.base + at + len(piece) - len(stripped)
        if self.size > self.limit:
            self.pieces = []
        else:
            self.pieces.append(piece)

    def _record(self, piece: bytes, at: int, closing: bool) -> Iterator[Event]:
        self._hold(piece, at)
        number, size, offset = self.number, self.size, self.at if self.content else self.base + at
        data = b"".join(self.pieces).strip(WS) if size <= self.limit else b""
        empty = not self.content
        broken = self.broken
        self.pieces, self.size, self.content, self.broken = [], 0, False, False
        if empty and closing and number == 0:
            return  # [] or [ ]: no records
        self.number += 1
        if size > self.limit:
            yield SetAside(number, DOCUMENT_TOO_LARGE(limit=self.limit), size, offset)
        elif empty:
            yield SetAside(number, EMPTY_RECORD(), 0, offset)
        elif broken:
            yield SetAside(number, LINE_BREAK_IN_STRING(), len(data), offset)
        else:
            yield Record(number, offset, data.translate(_ONE_LINE))


def cut(chunks: Iterator[bytes], limit: int) -> Iterator[Event]:
    """The records of a JSON array file read as chunks; NotAnArray if it holds no array."""
    cutter = ArrayCutter(limit)
    for chunk in chunks:
        yield from cutter.feed(chunk)
    yield from cutter.finish()

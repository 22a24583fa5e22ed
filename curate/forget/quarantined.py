"""Quarantined records of a forgotten source, or whose line holds what `--match` seeks.

A quarantined record is a line curate could not read as a document (malformed JSON, a
missing text field). The version's `quarantine/` lists where it is (file, line, byte
offset, size, reason), never its bytes; but that listing points at a person's data in the
input, and `--match` must find them there too, so such records can be forgotten:

- **Keyed by content**, as documents are: the xxh3-128 of the line's bytes as the file
  holds them (`raw_hash`), kept in the exclusions (`quarantined`), so the erasure outlives a
  line inserted before it. Their offsets in each input as it is now are only a cache
  (`resolved[name]["quarantined"]`), like the derived ids of documents.
- **Only where the line has a byte offset** (JSONL, plain or compressed): a bad CSV row or
  Parquet record has no line of bytes to key it by, and stays listed (a warning says so).
- **Counted as before, listed nowhere**: such a record was read and could not be used, so
  the counts (quarantined, by reason) stay as they were and reconcile; no quarantine file of
  a later version, nor the stage cache, names where it is, and the manifest's `forgotten`
  says how many listings were left out.
"""

from __future__ import annotations

from collections.abc import Sequence

import xxhash

from curate.io.batches import QuarantineRecord
from curate.io.compressed import decompressed
from curate.io.inputs import InputFile
from curate.io.lines import JSONL_FORMATS

Position = tuple[str, int]
"""(input name, byte offset of the line): how a run names a quarantined record to leave out
(`curate.excluded_rows.listed`)."""


def raw_hash(data: bytes) -> str:
    return xxhash.xxh3_128_hexdigest(data)


def lines_of(f: InputFile, records: Sequence[QuarantineRecord]) -> list[bytes | None]:
    """Each record's line as the input holds it (None: no offset, or not a JSONL input)."""
    out: list[bytes | None] = [None] * len(records)
    wanted = [(i, r) for i, r in enumerate(records) if r.offset is not None and r.nbytes > 0]
    if not wanted or f.format not in JSONL_FORMATS:
        return out
    if f.format == "jsonl":
        with open(f.path, "rb") as source:
            for i, r in wanted:
                assert r.offset is not None
                source.seek(r.offset)
                out[i] = source.read(r.nbytes)
        return out
    ranges = sorted(wanted, key=lambda pair: pair[1].offset or 0)  # one pass over the stream
    at, held, k = 0, b"", 0
    for piece in decompressed(f.path, f.format):
        held += piece
        while k < len(ranges):
            i, r = ranges[k]
            start = (r.offset or 0) - at
            if start + r.nbytes > len(held):
                break
            out[i] = held[start : start + r.nbytes]
            k += 1
        if k == len(ranges):
            break
        drop = min(len(held), max(0, (ranges[k][1].offset or 0) - at))  # before the next line
        at += drop
        held = held[drop:]
    return out

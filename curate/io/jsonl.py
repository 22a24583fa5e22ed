"""Reading JSONL partitions of text records: blocks of whole lines parsed by `BlockParser`.

The lines come from `curate.io.lines` (what a partition owns, the byte-order mark, lines
too long to hold, where each block starts); line numbers advance by the lines each block
holds, from 1 at the partition's first line (the sink makes them the file's line numbers
when it releases a record), so every quarantined line is named by its physical 1-based
line number and its offset, and a record without an id by `name@offset` (`LineIds`).
"""

from __future__ import annotations

from collections.abc import Iterator

from curate.errors import CurateError
from curate.io.batches import FieldSpec, ReadChunk
from curate.io.jsonl_block import BlockParser
from curate.io.lines import Block, Broken, line_blocks, line_ids
from curate.io.partitions import Partition
from curate.io.records import ErrorSink
from curate.reasons import DOCUMENT_TOO_LARGE


def read_jsonl(
    part: Partition,
    fields: FieldSpec,
    sink: ErrorSink,
    batch_bytes: int,
    use_threads: bool,
    max_line_bytes: int | None = None,
) -> Iterator[ReadChunk]:
    parser = BlockParser(line_ids(part), fields, sink, use_threads)
    line = 1
    try:
        for event in line_blocks(part, batch_bytes, max_line_bytes):
            if isinstance(event, Broken):
                nbytes = event.partial_bytes or event.lost_bytes
                sink.bad(line, event.reason, nbytes, offset=event.offset)
                yield ReadChunk(parser.parse(b"", line, event.offset)[0], sink.take())
                return
            if not isinstance(event, Block):  # a line over the bound, skipped unread
                reason = DOCUMENT_TOO_LARGE(limit=max_line_bytes)
                sink.bad(line, reason, event.nbytes, offset=event.offset)
                line += 1
                continue
            batch, lines = parser.parse(event.data, line, event.offset)
            line += lines
            quarantined = sink.take()
            if batch.num_rows or quarantined:
                yield ReadChunk(batch, quarantined, parser.lines, parser.offsets)
    except OSError as exc:
        raise CurateError(f"{part.input.name} cannot be read: {exc.strerror or exc}") from None
    quarantined = sink.take()
    if quarantined:  # a long last line
        yield ReadChunk(parser.parse(b"", line, 0)[0], quarantined)

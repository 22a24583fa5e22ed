"""Reading one partition into record batches with exactly `FieldSpec.schema()`.

The one entry point the engines call; it checks that the input is still the one
that was discovered (its stat identity, so a file rewritten mid-run cannot mix two
versions into one dataset) and dispatches by format.
"""

from __future__ import annotations

from collections.abc import Iterator

from curate.errors import CurateError
from curate.input_watch import check
from curate.io.batches import ID, TEXT, FieldSpec, ReadChunk
from curate.io.columnar import read_columnar
from curate.io.inputs import InputFile
from curate.io.jsonl import read_jsonl
from curate.io.partitions import Partition
from curate.io.records import ErrorSink
from curate.io.textfiles import read_text_folder

JSONL_FORMATS = ("jsonl", "jsonl.gz", "jsonl.zst")


def check_inputs(files: list[InputFile], fields: FieldSpec) -> None:
    """Refuse now, before a build writes anything, what `read_partition` would refuse in a
    worker for every partition: a kept field named like a core column, chat records in a
    format the chat reader does not read."""
    clash = {ID, TEXT} & set(fields.keep_fields)
    if clash:
        name = sorted(clash)[0]
        raise CurateError(
            f"kept field {name!r} would replace the document's own column; "
            "rename it in the input or drop it from the recipe's fields",
            at=("fields", name),
        )
    for inp in files:
        if fields.chat is not None and inp.format not in JSONL_FORMATS:
            raise CurateError(
                f"{inp.name}: chat records are read from JSONL (.jsonl, .jsonl.gz, .jsonl.zst)",
                at=("inputs",),
            )


def read_partition(
    part: Partition,
    fields: FieldSpec,
    *,
    on_error: str = "quarantine",
    batch_bytes: int = 8 << 20,
    use_threads: bool = False,
) -> Iterator[ReadChunk]:
    """The partition's documents in input order, in batches of about batch_bytes of text.

    Bad records are returned in each chunk's `quarantined` (on_error="quarantine")
    or stop the read with a CurateError naming file and line (on_error="fail").
    `use_threads` lets Arrow parse with its CPU pool (`pa.set_cpu_count`); leave it
    off when the engine already runs one worker process per core.
    """
    sink = ErrorSink(part.input.name, on_error)
    if batch_bytes < 1:
        raise ValueError(f"batch_bytes must be positive, not {batch_bytes}")
    clash = {ID, TEXT} & set(fields.keep_fields)
    if clash:
        raise CurateError(
            f"kept field {sorted(clash)[0]!r} would replace the document's own column; "
            "rename it in the input or drop it from the recipe's fields"
        )
    fmt = part.input.format
    if fields.chat is not None:  # chat records: the chat package maps them to `messages`
        from curate.chat.reader import read_chat_jsonl

        _check_unchanged(part)
        yield from read_chat_jsonl(part, fields, fields.chat, sink, batch_bytes)
    elif fmt in JSONL_FORMATS:
        _check_unchanged(part)
        yield from read_jsonl(part, fields, sink, batch_bytes, use_threads)
    elif fmt in ("parquet", "arrow", "hf_disk"):
        if fmt != "hf_disk":
            _check_unchanged(part)
        yield from read_columnar(part, fields, sink, batch_bytes, use_threads)
    elif fmt == "text_folder":
        yield from read_text_folder(part, fields, sink, batch_bytes)
    else:
        raise ValueError(f"unknown input format {fmt!r}")


def _check_unchanged(part: Partition) -> None:
    """The input is still the file discovered (its stat identity, curate.input_watch);
    the worker checks again once the partition has been read."""
    check(part.input)

"""Reading .txt/.md files, one document per file: a folder of them, or one named alone.

A text file has no fields, so its id always derives from its path
(`<folder name>/<relative path>`, or the file's own name for a file named as an input,
whatever the recipe's id_field says: a recipe
that mixes JSONL with a notes folder keeps working) and kept metadata fields are
null. The text is the file's bytes decoded as UTF-8, minus a leading byte-order
mark; line endings are left as they are, since normalising them is a stage's job.

A file whose size alone puts its text over `max_document_bytes` is set aside unread
(`document_too_large`, by its own name): reading, decoding and holding it whole would
take several times its size before any bound could apply.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pyarrow as pa

from curate.errors import CurateError
from curate.io import folders
from curate.io.batches import FieldSpec, ReadChunk
from curate.io.lines import BOM
from curate.io.partitions import Partition
from curate.io.records import ErrorSink
from curate.reasons import DOCUMENT_TOO_LARGE, INVALID_UTF8_FILE


def read_text_folder(
    part: Partition,
    fields: FieldSpec,
    sink: ErrorSink,
    batch_bytes: int,
    max_document_bytes: int | None = None,
) -> Iterator[ReadChunk]:
    inp = part.input
    members = folders.members_of(inp.path, inp.format, inp.size, inp.mtime_ns, inp.name)
    schema = fields.schema()
    ids: list[str] = []
    texts: list[str] = []
    pending = 0
    for member in members[part.start : part.stop]:
        doc_id = f"{inp.name}/{member.rel}"
        path = os.path.join(inp.path, member.rel)
        data = _read(path, member.size, member.mtime_ns, doc_id, max_document_bytes)
        text = _text(data, doc_id, sink, max_document_bytes)
        if text is None or isinstance(data, int):
            continue
        ids.append(doc_id)
        texts.append(text)
        pending += len(data)
        if pending >= batch_bytes:
            yield ReadChunk(_batch(schema, ids, texts), sink.take())
            ids, texts, pending = [], [], 0
    quarantined = sink.take()
    if ids or quarantined:
        yield ReadChunk(_batch(schema, ids, texts), quarantined)


def read_text_file(
    part: Partition,
    fields: FieldSpec,
    sink: ErrorSink,
    max_document_bytes: int | None = None,
) -> Iterator[ReadChunk]:
    """A .txt/.md file named as an input: one document, its id the input's name."""
    inp = part.input
    data = _read(inp.path, inp.size, inp.mtime_ns, inp.name, max_document_bytes)
    text = _text(data, inp.name, sink, max_document_bytes)
    docs = [] if text is None else [text]
    yield ReadChunk(_batch(fields.schema(), [inp.name] * len(docs), docs), sink.take())


def _text(data: bytes | int, doc_id: str, sink: ErrorSink, limit: int | None) -> str | None:
    """The file's text, or None when it was set aside: over the bound (`data` is then its
    text's size, the file unread), or not UTF-8."""
    if isinstance(data, int):
        sink.bad(None, DOCUMENT_TOO_LARGE(limit=limit), data, file=doc_id)
        return None
    skip = len(BOM) if data.startswith(BOM) else 0
    try:
        return data[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        sink.bad(None, INVALID_UTF8_FILE(byte=exc.start + skip), len(data), file=doc_id)
        return None


def _read(path: str, size: int, mtime_ns: int, doc_id: str, limit: int | None) -> bytes | int:
    """The file's bytes, or, when its text (the bytes after a byte-order mark) is over
    `limit`, the text's size, found from the file's size and its first three bytes."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if (st.st_size, st.st_mtime_ns) != (size, mtime_ns):
                raise CurateError(
                    f"{doc_id} changed while curate was running "
                    "(its size or modification time differs from when inputs were listed)"
                )
            if limit is not None and st.st_size - len(BOM) > limit:
                return st.st_size - (len(BOM) if f.read(len(BOM)) == BOM else 0)
            return f.read()
    except OSError as exc:
        raise CurateError(f"{doc_id} cannot be read: {exc.strerror or exc}") from None


def _batch(schema: pa.Schema, ids: list[str], texts: list[str]) -> pa.RecordBatch:
    n = len(ids)
    arrays = [pa.array(ids, pa.string()), pa.array(texts, pa.string())]
    arrays += [pa.nulls(n, f.type) for f in list(schema)[2:]]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)

"""Reading a recipe's inputs for what forget needs of each document: its id and text hash.

Only the driver reads here (`curate forget`, and a build's re-resolution of inputs that
changed): every record is read as a run reads it (`curate.reading.read_partition`), so
ids are the ids the run gives and the text is hashed as the run reads it. Nothing read is
kept but the ids and hashes asked for.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence

import pyarrow as pa

from curate.forget.exclusions import text_hash
from curate.io.batches import ID, TEXT, FieldSpec, QuarantineRecord
from curate.io.inputs import InputFile
from curate.io.partitions import plan_partitions
from curate.reading import read_partition
from curate.recipe import Recipe

Wanted = Callable[[str, list[str], list[str], list[str]], list[bool]]
"""(input name, ids, texts, text hashes) -> which of these documents are wanted."""

Quarantined = Callable[[InputFile, list[QuarantineRecord]], None]
"""Told each chunk's quarantined records (`curate.forget.quarantined`)."""


def documents(
    recipe: Recipe,
    files: Sequence[InputFile],
    wanted: Wanted,
    quarantined: Quarantined | None = None,
) -> Iterator[tuple[str, str, str]]:
    """(input name, id, text hash) of every wanted document, inputs in order."""
    fields = FieldSpec(recipe.text_field, recipe.id_field, {}, chat=recipe.chat)
    for part in plan_partitions(list(files), recipe.partition_size):
        name = part.input.name
        for chunk in read_partition(part, fields, on_error="quarantine",
                                    batch_bytes=recipe.batch_size,
                                    max_document_bytes=recipe.max_document_bytes):  # fmt: skip
            batch = chunk.batch
            if quarantined is not None and chunk.quarantined:
                quarantined(part.input, chunk.quarantined)
            if batch.num_rows == 0:
                continue
            ids = [str(i) for i in batch.column(ID).to_pylist()]
            texts = _texts(batch)
            hashes = [text_hash(t) for t in texts]
            for doc_id, h, keep in zip(ids, hashes, wanted(name, ids, texts, hashes),
                                       strict=True):  # fmt: skip
                if keep:
                    yield name, doc_id, h


def _texts(batch: pa.RecordBatch) -> list[str]:
    """The text a document is known by: its text, or a chat record's messages as JSON."""
    if TEXT in batch.schema.names:
        return [t if isinstance(t, str) else "" for t in batch.column(TEXT).to_pylist()]
    column = batch.column("messages") if "messages" in batch.schema.names else None
    if column is None:
        return [""] * batch.num_rows
    return [json.dumps(m, sort_keys=True, ensure_ascii=False) for m in column.to_pylist()]

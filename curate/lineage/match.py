"""`curate trace --match`: the ids of documents whose text matches a pattern, wherever the
version's records still reach them.

Searched: the version's own text (shards with a `text` column), and the inputs the manifest
lists, where they are still there as they were read (size and modification time as the
manifest records them): a JSONL line (plain or compressed) that matches names its record's
id (the recipe's id field, or the id curate derived from the line), a Parquet/Arrow row its
id, a text folder's file its path. So a document is found even where the version holds it
redacted, tokenized or not at all (removed). The pattern and the text stay here: only ids
go back, to be traced.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc

from curate.io.lines import BOM
from curate.output.shards import read_stream

if TYPE_CHECKING:
    from curate.lineage.trace import Tracer

log = logging.getLogger(__name__)


Found = dict[str, dict[str, Any]]
"""id -> where the match was met in an input (file, line or row, offset), {} in the version."""


def matching_ids(tracer: Tracer, pattern: re.Pattern[str]) -> Found:
    manifest = tracer.manifest
    recipe = manifest.get("recipe") or {}
    text_field = recipe.get("text_field") or "text"
    id_field = recipe.get("id_field")
    found: Found = {}
    for shard in manifest["shards"]:  # the version's text, where it keeps text
        table = read_stream(tracer.version.path / shard["path"])
        if "text" in table.schema.names and "id" in table.schema.names:
            hit = pc.match_substring_regex(table.column("text"), pattern.pattern)
            for doc_id in table.column("id").filter(hit.fill_null(False)).to_pylist():
                found.setdefault(doc_id, {})
    for inp in manifest["inputs"]:
        if not _unchanged(inp):
            log.warning("trace: %s is not there as it was read; not searched", inp.get("name"))
            continue
        for doc_id, where in _input_ids(inp, pattern, text_field, id_field):
            if not found.get(doc_id):
                found[doc_id] = {"file": inp["name"], "path": inp["path"],
                                 "hash": inp.get("content_hash"), **where}  # fmt: skip
    return found


def _unchanged(inp: dict[str, Any]) -> bool:
    try:
        st = os.stat(inp["path"])
    except (OSError, KeyError, TypeError):
        return False
    if inp.get("format") in ("text_folder", "hf_disk"):
        return True  # a folder's members are checked as they are read
    return st.st_size == inp.get("size") and st.st_mtime_ns == inp.get("mtime_ns")


def _input_ids(
    inp: dict[str, Any], pattern: re.Pattern[str], text_field: str, id_field: str | None
) -> Iterator[tuple[str, dict[str, Any]]]:
    fmt, name, path = inp.get("format"), inp["name"], inp["path"]
    if fmt in ("jsonl", "jsonl.gz", "jsonl.zst"):
        yield from _jsonl_ids(path, fmt, name, pattern, text_field, id_field)
    elif fmt in ("parquet", "arrow"):
        yield from _columnar_ids(path, fmt, name, pattern, text_field, id_field)
    elif fmt == "text_folder":
        for root, _dirs, files in os.walk(path):
            for file in sorted(files):
                full = os.path.join(root, file)
                try:
                    with open(full, encoding="utf-8", errors="replace") as f:
                        if pattern.search(f.read()):
                            rel = os.path.relpath(full, path)
                            yield f"{name}/{rel}", {"member": rel}
                except OSError:
                    continue
    else:
        log.warning("trace: %s (%s) is not searched by --match", name, fmt)


def _jsonl_ids(
    path: str, fmt: str, name: str, pattern: re.Pattern[str], text_field: str, id_field: str | None
) -> Iterator[tuple[str, dict[str, Any]]]:
    from curate.io.compressed import decompressed

    pieces = decompressed(path, fmt) if fmt != "jsonl" else _plain(path)
    offset, number, rest = 0, 1, b""
    for piece in pieces:
        data = rest + piece
        cut = data.rfind(b"\n") + 1
        block, rest = data[:cut], data[cut:]
        yield from _lines(block, offset, number, fmt, name, pattern, text_field, id_field)
        offset += len(block)
        number += block.count(b"\n")
    if rest:
        yield from _lines(rest, offset, number, fmt, name, pattern, text_field, id_field)


def _plain(path: str) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while piece := f.read(8 << 20):
            yield piece


def _lines(
    block: bytes,
    offset: int,
    number: int,
    fmt: str,
    name: str,
    pattern: re.Pattern[str],
    text_field: str,
    id_field: str | None,
) -> Iterator[tuple[str, dict[str, Any]]]:
    at = 0
    for k, line in enumerate(block.split(b"\n")):
        start, at = at, at + len(line) + 1
        if offset + start == 0 and line.startswith(BOM):  # not part of the first line
            line, start = line[len(BOM) :], len(BOM)
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            text = record.get(text_field) if isinstance(record, dict) else None
        except ValueError:
            continue  # quarantined: traced by file and line, not by id
        if not isinstance(text, str) or not pattern.search(text):
            continue
        where = {"line": number + k, "offset": offset + start}
        if id_field is not None:
            if record.get(id_field) is not None:
                yield str(record[id_field]), where
        elif fmt == "jsonl":
            yield f"{name}@{offset + start}", where
        else:
            yield f"{name}:{number + k}", where


def _columnar_ids(
    path: str, fmt: str, name: str, pattern: re.Pattern[str], text_field: str, id_field: str | None
) -> Iterator[tuple[str, dict[str, Any]]]:
    import pyarrow as pa

    if fmt == "parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path, columns=[text_field] + ([id_field] if id_field else []))
    else:
        with pa.memory_map(path) as source:
            try:
                table = pa.ipc.open_file(source).read_all()
            except pa.ArrowInvalid:
                table = pa.ipc.open_stream(source).read_all()
    hit = pc.match_substring_regex(table.column(text_field).cast(pa.string()), pattern.pattern)
    rows = pc.indices_nonzero(hit.fill_null(False)).to_pylist()
    ids = table.column(id_field).cast(pa.string()) if id_field else None
    for r in rows:
        yield (str(ids[r].as_py()) if ids is not None else f"{name}:{r}"), {"row": r + 1}

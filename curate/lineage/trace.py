"""`curate trace`: one document's way from its input line to its place in the output.

Everything comes from the version folder: the lineage side table (source, what map stages
changed, the PII types and spans a pii stage found), the rejected files (which stage removed
it and why, or how many near-duplicates its cluster had when it was kept) and the shards
(its row and token range). A trace holds positions, types and counts, never document text,
so it may be shown where the text may not (a PII stage's values included).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate.errors import CurateError
from curate.lineage.lookup import Lineage
from curate.output.shards import read_stream
from curate.paths import inside

if TYPE_CHECKING:
    from curate.version import Version

DEDUP_STAGES = ("exact_dedup", "minhash_dedup")
REJECTED_COLUMNS = {
    "id": pa.string(),
    "stage": pa.string(),
    "reason": pa.string(),
    "duplicate_of": pa.string(),
    "similarity": pa.float32(),
}


@dataclass
class Trace:
    """One document as the version records it; `rows()` is what every view shows."""

    id: str
    fate: str  # "written", "removed by <stage>"
    source: dict[str, Any] = field(default_factory=dict)
    stages: list[tuple[str, str]] = field(default_factory=list)  # (stage, what it did)
    output: dict[str, Any] = field(default_factory=dict)

    def rows(self) -> list[tuple[str, str]]:
        out = [("id", self.id), ("fate", self.fate)]
        out += [(f"source {k}", _text(v)) for k, v in self.source.items()]
        out += [(f"stage {name}", what) for name, what in self.stages]
        out += [(f"output {k}", _text(v)) for k, v in self.output.items()]
        return out

    def __str__(self) -> str:
        rows = self.rows()
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)

    def _repr_html_(self) -> str:
        body = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
            f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
            for k, v in self.rows()
        )
        return f"<table>{body}</table>"


def _text(value: Any) -> str:
    return "-" if value is None else str(value)


class Tracer:
    """Traces documents of one version; holds what several traces share (the rejected rows)."""

    def __init__(self, version: Version) -> None:
        version.check_files()
        self.version = version
        self.manifest = version.manifest
        self.lineage = Lineage(version)
        self._rejected: pa.Table | None = None

    @property
    def rejected(self) -> pa.Table:
        if self._rejected is None:
            self._rejected = _rejected(self.version)
        return self._rejected

    # -- entry points -------------------------------------------------------------------
    def by_id(self, doc_id: str) -> list[Trace]:
        found = [self._written(row) for row in self.lineage.find(doc_id)]
        removed = self.rejected.filter(pc.equal(self.rejected.column("id"), _str(doc_id)))
        found += [self._removed(r) for r in removed.to_pylist()]
        return found

    def by_row(self, shard: str, row: int, token: int | None = None) -> list[Trace]:
        index = self._shard_index(shard)
        table = read_stream(self.version.path / self.manifest["shards"][index]["path"])
        if not 0 <= row < table.num_rows:
            raise CurateError(f"shard {shard} has rows 0-{table.num_rows - 1}, not {row}")
        record = table.slice(row, 1).to_pylist()[0]
        if "doc_ids" not in record:
            if (
                token is not None
                and "num_tokens" in record
                and not 0 <= token < record["num_tokens"]
            ):
                raise CurateError(f"row {row} has tokens 0-{record['num_tokens'] - 1}")
            return self.by_id(record["id"])
        ids: list[str] = record["doc_ids"]
        if token is None:
            return [t for doc_id in ids for t in self.by_id(doc_id)]
        starts = record.get("doc_starts") or (record.get("cu_seqlens") or [])[: len(ids)]
        length = record.get("num_tokens") or len(record.get("input_ids") or [])
        if not 0 <= token < length:
            raise CurateError(f"row {row} of shard {shard} has tokens 0-{length - 1}, not {token}")
        k = max(i for i, s in enumerate(starts) if s <= token)
        return self.by_id(ids[k])

    def by_match(self, pattern: str) -> list[Trace]:
        from curate.lineage.match import matching_ids

        found = matching_ids(self, re.compile(pattern))
        traces = []
        for doc_id, where in found.items():
            for t in self.by_id(doc_id):
                if t.fate != "written" and where:  # lineage keeps written documents' sources
                    t.source = where
                traces.append(t)
        return traces

    # -- pieces -------------------------------------------------------------------------
    def _shard_index(self, shard: str) -> int:
        shards = self.manifest["shards"]
        if shard.isdigit() and int(shard) < len(shards):
            return int(shard)
        for i, s in enumerate(shards):
            if shard in (s["path"], s["path"].rsplit("/", 1)[-1]):
                return i
        raise CurateError(f"{self.version.path} has no shard {shard!r} (an index or a shard path)")

    def _source(self, row: dict[str, Any]) -> dict[str, Any]:
        inputs = self.manifest["inputs"]
        inp = inputs[row["input"]] if row.get("input") is not None else {}
        out = {
            "file": inp.get("name"),
            "path": inp.get("path"),
            "hash": inp.get("content_hash"),
        }
        fmt = inp.get("format")
        unit = "row" if fmt in ("parquet", "arrow", "hf_disk", "csv", "tsv") else "line"
        if fmt == "json":
            unit = "record"
        out[unit] = row.get("line")
        out["offset"] = row.get("offset")
        return out

    def _written(self, row: dict[str, Any]) -> Trace:
        trace = Trace(row["id"], "written", self._source(row))
        trace.stages = self._stages(row["id"], row, None)
        trace.output = self._output(row)
        return trace

    def _removed(self, rejected: dict[str, Any]) -> Trace:
        trace = Trace(
            rejected["id"], f"removed by {rejected['stage']}", self._derived(rejected["id"])
        )
        trace.stages = self._stages(rejected["id"], None, rejected)
        return trace

    def _derived(self, doc_id: str) -> dict[str, Any]:
        """Where a removed document came from, when its id was derived from it (lineage keeps
        the documents written)."""
        for inp in self.manifest["inputs"]:
            name = inp["name"]
            for sep, unit in (("@", "offset"), (":", "line")):
                rest = doc_id[len(name) + 1 :] if doc_id.startswith(name + sep) else ""
                if rest.isdigit():
                    number = int(rest)
                    if sep == ":" and inp.get("format") not in ("jsonl.gz", "jsonl.zst"):
                        unit, number = "row", number + 1  # derived ids count rows from 0
                    return {"file": name, "path": inp.get("path"),
                            "hash": inp.get("content_hash"), unit: number}  # fmt: skip
        return {"file": "not recorded (lineage keeps written documents; this id names no line)"}

    def _stages(
        self, doc_id: str, row: dict[str, Any] | None, rejected: dict[str, Any] | None
    ) -> list[tuple[str, str]]:
        out = []
        reached = True
        changed = int(row.get("changed") or 0) if row is not None else 0
        for stage in self.manifest["stages"]:
            name, position = stage["name"], stage["position"]
            label = f"{position} {name}"
            if not reached:
                out.append((label, "not reached"))
                continue
            if rejected is not None and rejected["stage"] == name:
                out.append((label, _removal(rejected)))
                reached = False
                continue
            if name in DEDUP_STAGES:
                out.append((label, self._kept(doc_id, name)))
            elif row is None:
                out.append((label, "passed (what it changed is recorded for written documents)"))
            elif name == "pii":
                found = row.get("pii")
                out.append((label, f"found {found}" if found else "found nothing"))
            elif name in ("tokenize", "chat_template"):
                out.append((label, "tokenized (see output tokens)"))
            elif stage.get("kind") == "map":
                did = "changed the text" if changed >> position & 1 else "kept the text as it was"
                out.append((label, did))
            else:
                out.append((label, "kept"))
        return out

    def _kept(self, doc_id: str, stage: str) -> str:
        rej = self.rejected
        mask = pc.and_(pc.equal(rej.column("stage"), _str(stage)),
                       pc.equal(rej.column("duplicate_of"), _str(doc_id)))  # fmt: skip
        others = pc.sum(pc.cast(mask, pa.int64())).as_py() or 0  # nulls are not counted
        if not others:
            return "kept: no duplicate"
        return f"kept: representative of a cluster of {others + 1}"

    def _output(self, row: dict[str, Any]) -> dict[str, Any]:
        shards = self.manifest["shards"]
        shard = shards[row["shard"]]
        out: dict[str, Any] = {"split": shard.get("split"), "shard": shard["path"],
                               "row": row["row"]}  # fmt: skip
        table = read_stream(self.version.path / shard["path"])
        record = table.slice(row["row"], 1).to_pylist()[0]
        if "cu_seqlens" in record and row.get("start") is not None:  # whole conversations
            k = record["doc_ids"].index(row["id"])
            cu = record["cu_seqlens"]
            out["tokens"] = f"{cu[k]}-{cu[k + 1] - 1} of the row"
        elif "doc_ids" in record and row.get("start") is not None:
            out["token start"] = row["start"]
            out["tokens"] = _packed_length(self.version, shards, row, table)
        elif "num_tokens" in record:
            out["tokens"] = f"0-{record['num_tokens'] - 1}"
        return out


def _str(value: str) -> pa.Scalar:
    """A string scalar built from its bytes: pyarrow makes one from a Python object through a
    check that imports pandas (seconds, for a lookup that takes milliseconds)."""
    data = value.encode()
    offsets = pa.py_buffer(np.array([0, len(data)], np.int32).tobytes())
    return pa.Array.from_buffers(pa.string(), 1, [None, offsets, pa.py_buffer(data)])[0]


def _rejected(version: Version) -> pa.Table:
    """The version's rejected rows (id, stage, reason, duplicate_of, similarity), every path
    checked to stay inside it."""
    source = version.path / "manifest.json"
    tables = []
    for i, record in enumerate(version.manifest.get("rejected") or []):
        path = inside(version.path, record.get("path"), source=source, field=f"rejected[{i}].path")
        tables.append(read_stream(path).select(list(REJECTED_COLUMNS)))
    if not tables:
        return pa.schema(list(REJECTED_COLUMNS.items())).empty_table()
    return pa.concat_tables(tables)


def _removal(rejected: dict[str, Any]) -> str:
    what = f"removed: {rejected['reason']}"
    if rejected.get("duplicate_of"):
        what += f", duplicate of {rejected['duplicate_of']}"
        if rejected.get("similarity") is not None:
            what += f" (similarity {rejected['similarity']:.3f})"
    return what


def _packed_length(version: Version, shards: list[dict[str, Any]], row: dict[str, Any],
                   table: pa.Table) -> str:  # fmt: skip
    """How many tokens the document has, and over how many rows: its pieces followed row by
    row (a piece that reaches its row's end goes on in the next row, the next shard of its
    split, or the tail shard)."""
    doc_id, index, r = row["id"], row["shard"], row["row"]
    total = rows = 0
    tail_tried = False
    while True:
        if (
            r >= table.num_rows
            and index + 1 < len(shards)
            and (shards[index + 1].get("split") == shards[index].get("split"))
        ):
            index, r = index + 1, 0
            table = read_stream(version.path / shards[index]["path"])
        record = table.slice(r, 1).to_pylist()[0] if r < table.num_rows else None
        k = _piece(record, doc_id, total)
        if k is None and not tail_tried:
            tail_tried = True
            found = _tail_piece(version, shards, row, doc_id, total)
            if found is not None:
                table, r = found
                record = table.slice(r, 1).to_pylist()[0]
                k = _piece(record, doc_id, total)
        if k is None or record is None:
            break
        ends = [*record["doc_starts"][1:], record["num_tokens"]]
        total += ends[k] - record["doc_starts"][k]
        rows += 1
        if k != len(record["doc_ids"]) - 1 or ends[k] < record["num_tokens"]:
            break  # it ends inside this row
        r += 1
    return f"{total} from token {row['start']} of row {row['row']}, over {rows} row(s)"


def _piece(record: dict[str, Any] | None, doc_id: str, before: int) -> int | None:
    """Where in a packed row the document's piece after `before` tokens is, if there."""
    if record is None or "doc_starts" not in record:
        return None
    for k, (d, offset) in enumerate(zip(record["doc_ids"], record["doc_offsets"], strict=True)):
        if d == doc_id and offset == before:
            return k
    return None


def _tail_piece(
    version: Version, shards: list[dict[str, Any]], row: dict[str, Any], doc_id: str, before: int
) -> tuple[pa.Table, int] | None:
    """The tail shard row holding the document's piece that starts after `before` tokens."""
    split = shards[row["shard"]].get("split")
    packing = version.manifest.get("packing") or {}
    for path in packing.get("tail_shards") or []:
        match = next((s for s in shards if s["path"] == path), None)
        if match is None or match.get("split") != split or path == shards[row["shard"]]["path"]:
            continue
        table = read_stream(version.path / path)
        for r, record in enumerate(table.select(["doc_ids", "doc_offsets"]).to_pylist()):
            for d, offset in zip(record["doc_ids"], record["doc_offsets"], strict=True):
                if d == doc_id and offset == before:
                    return table, r
    return None

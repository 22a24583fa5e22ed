"""Packed rows of an earlier version packed again without the forgotten documents.

A packed version's rows are windows of each partition's token stream (`curate.output.
packing`): a document runs over rows and shards, and the partition's short last row went to
the tail shard, packed with every other partition's. A partition holding a forgotten
document is packed again from its documents' token ids as its rows hold them (never
tokenized again), less the forgotten ones, by the packer that made it (its rows keep their
names, `pack-<key>-<row>`); its new tail replaces its old one in the tail stream, which is
packed again into the tail shard. Every other partition's shards are left as they are.

A row's partition is in its id (`pack[-<split>]-<key>-<row>`), so the rows of partitions
merged into one shard at publish (`group-*.arrow`) are found too, and replaced in place. A
document wholly in the tail shard is told by its line's byte offset in the lineage side
table against the partitions' byte ranges (conversations too: the chat reader keeps each
line's offset), or by its input when that is one partition. A version where this cannot
be told (no lineage; a conversation of a tail from an input of several partitions in a
version made before the chat reader kept offsets) is not rewritten (`CannotRepack`): the
purge removes it as before. Packed conversations are
packed again whole, with their loss column, by the packer that made them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate.lineage.table import DOCUMENTS
from curate.output.chat_packing import CU_SEQLENS, ChatPackSpec
from curate.output.packing import DOC_OFFSET, NUM_TOKENS, TOKENS, PackSpec
from curate.output.shards import ShardInfo, ShardWriter, read_stream, write_batches, write_table
from curate.output.tails import TailShard, pack_tails

PART = re.compile(r"^(?:(?P<split>[^/]+)/)?shards/part-(?P<key>[0-9a-f]+)-\d{5}\.arrow$")
TAIL = re.compile(r"^(?:(?P<split>[^/]+)/)?shards/tail-00000\.arrow$")
Group = tuple[str | None, str | None]
GROUP_BYTES = 8 << 20  # token bytes per batch fed to the packer (a run feeds one per chunk)


class CannotRepack(Exception):
    """Why this packed version cannot be packed again (the purge removes it instead)."""


@dataclass
class Piece:
    id: str
    tokens: np.ndarray
    before: int  # tokens of the document before this piece
    key: str = ""  # the partition whose row holds it ("": a tail shard's)
    target: np.ndarray | None = None  # a conversation's loss column (labels or loss_mask)


@dataclass
class Repacked:
    shards: list[dict[str, Any]]  # the manifest's new shard list, in order
    tails: list[TailShard]
    spec: PackSpec
    removed: int  # documents gone
    written: set[str] = field(default_factory=set)  # the shards written anew (paths)


def repack(
    source: Path, target: Path, manifest: dict[str, Any], forgotten: frozenset[str], mode: int
) -> Repacked | None:
    """The packed shards of `source` written into `target` without the forgotten documents;
    None when no shard holds one (every shard is then linked by the caller). With splits,
    each split's rows and tail are packed on their own, as a run packs them. A partition's
    rows are known by their ids (`pack[-<split>]-<key>-<row>`), so a shard that merged small
    partitions' rows at publish is written again with the affected ones' new rows in their
    place."""
    packing = manifest.get("packing") or {}
    if packing.get("kind") not in ("tokens", "conversations"):
        raise CannotRepack(f"packing of kind {packing.get('kind')!r}")
    if not manifest.get("lineage"):
        raise CannotRepack("no lineage side table to tell a tail document's partition")
    shards = manifest["shards"]
    tables = [read_stream(source / s["path"]) for s in shards]
    keys: list[list[str] | None] = []  # each row's partition key (None: a tail shard)
    for s, table in zip(shards, tables, strict=True):
        keys.append(None if TAIL.match(s["path"]) else _row_keys(s, table))
    spec = _spec(packing, tables[0].schema)
    pieces = [list(_pieces(t, k, spec)) for t, k in zip(tables, keys, strict=True)]
    owner: dict[str, str] = {}
    for i, k in enumerate(keys):
        if k is not None:
            owner.update((p.id, p.key) for p in pieces[i])
    splits: list[str | None] = list((manifest.get("splits") or {}).get("splits") or [None])
    tail_pieces = {split: _joined([p for i, s in enumerate(shards) if keys[i] is None
                                   and s.get("split") == split for p in pieces[i]])
                   for split in splits}  # fmt: skip
    _attribute(source, manifest, [p for ps in tail_pieces.values() for p in ps], owner)
    affected = {(shards[i].get("split"), p.key) for i in range(len(shards)) if keys[i]
                for p in pieces[i] if p.id in forgotten}  # fmt: skip
    affected |= {(s, owner[p.id]) for s, ps in tail_pieces.items() for p in ps if p.id in forgotten}
    if not affected:
        return None
    shard_bytes = int(manifest["recipe"]["output"]["shard_size"])
    new_tails: dict[Group, list[Piece]] = {}
    rows: dict[Group, list[tuple[pa.RecordBatch, int]]] = {}
    old_ended: dict[Group, int] = {}
    removed = 0
    for split, key in sorted(affected, key=lambda g: (g[0] or "", g[1] or "")):
        own = [p for i, s in enumerate(shards) if keys[i] and s.get("split") == split
               for p in pieces[i] if p.key == key]  # fmt: skip
        ids = {p.id for p in own}
        tail = [p for p in tail_pieces[split] if owner[p.id] == key]
        old_ended[(split, key)] = len(ids - {p.id for p in tail})
        mine = _joined(_joined(own) + tail)
        kept = [p for p in mine if p.id not in forgotten]
        removed += len(mine) - len(kept)
        rows[(split, key)], new_tails[(split, key)] = _packed(spec, split, key or "", kept)
    out: list[dict[str, Any]] = []
    new: set[str] = set()
    for i, s in enumerate(shards):
        split, row_keys = s.get("split"), keys[i]
        if row_keys is None:
            continue  # tail shards: below
        hit = [k for k in dict.fromkeys(row_keys) if (split, k) in affected]
        if not hit:
            out.append(dict(s))
        elif PART.match(s["path"]) and len(set(row_keys)) == 1:  # a partition's own shard
            group = (split, hit[0])
            if group in rows:  # at its first shard's place; its others go
                made = _write_rows(rows.pop(group), split, hit[0], target, shard_bytes, mode)
                out += made
                new |= {r["path"] for r in made}
        else:  # a merged shard: the affected partitions' rows replaced in place
            record = _splice(s, tables[i], row_keys, rows, old_ended, target, mode)
            out.append(record)
            new.add(record["path"])
    order = [p["key"] for p in manifest["partitions"]]
    tails: list[TailShard] = []
    for split in splits:  # each split's tail shard, after every partition's, as a run writes
        old = next((dict(s) for i, s in enumerate(shards)
                    if keys[i] is None and s.get("split") == split), None)  # fmt: skip
        if not any(g[0] == split for g in affected):
            if old is not None:
                out.append(old)
                tails.append(TailShard(ShardInfo(**old), _short(source / old["path"], spec)))
            continue
        stream = [p for p in tail_pieces[split] if (split, owner[p.id]) not in affected]
        stream += [p for g, ps in new_tails.items() if g[0] == split for p in ps]
        stream.sort(key=lambda p: order.index(owner[p.id]))  # (stable: each one's order kept)
        made_tails = _pack_tails(spec, split, stream, target, mode)
        tails += made_tails
        out += [t.info.to_dict() | {"split": split} for t in made_tails]
        new |= {t.info.path for t in made_tails}
    return Repacked(out, tails, spec, removed, new)


def _row_keys(shard: dict[str, Any], table: pa.Table) -> list[str]:
    """Each packed row's partition key, from its id (`pack[-<split>]-<key>-<row>`)."""
    split = shard.get("split")
    prefix = f"pack-{split}" if split else "pack"
    out = []
    for row_id in table.column("id").to_pylist():
        head, key, row = str(row_id).rsplit("-", 2)
        if head != prefix or not row.isdigit():
            raise CannotRepack(f"{shard['path']}: row {row_id!r} is not a partition's packed row")
        out.append(key)
    return out


def _splice(
    shard: dict[str, Any],
    table: pa.Table,
    row_keys: list[str],
    rows: dict[Group, list[tuple[pa.RecordBatch, int]]],
    old_ended: dict[Group, int],
    target: Path,
    mode: int,
) -> dict[str, Any]:
    """A merged shard written again: each affected partition's run of rows replaced by its
    new rows, the others' rows as they were."""
    split = shard.get("split")
    batches: list[pa.RecordBatch] = []
    documents = int(shard.get("documents") or 0)
    at = 0
    for key in dict.fromkeys(row_keys):
        n = row_keys.count(key)
        group = (split, key)
        if group in rows:
            batches += [b for b, _ in rows[group]]
            documents += sum(e for _, e in rows.pop(group)) - old_ended[group]
        else:
            batches += table.slice(at, n).to_batches()
        at += n
    path = target / shard["path"]
    path.parent.mkdir(parents=True, exist_ok=True)
    schema = table.schema
    info = write_batches(path, schema, (b.cast(schema) for b in batches if b.num_rows),
                         fsync=True, file_mode=mode, relative_to=target)  # fmt: skip
    tokens = sum(int(pc.sum(b.column(NUM_TOKENS)).as_py() or 0) for b in batches)
    return info.to_dict() | {"tokens": tokens, "documents": documents, "split": split}


def _short(path: Path, spec: PackSpec) -> int:
    """The tokens of a tail shard's last row when it is short (as `pack_tails` says)."""
    counts = read_stream(path).column(NUM_TOKENS)
    last = int(counts[-1].as_py()) if len(counts) else 0
    return last if 0 < last < spec.seq_len else 0


def _spec(packing: dict[str, Any], schema: pa.Schema) -> PackSpec:
    """The packing the version was made with: token windows, or whole conversations with
    their loss column (`labels` or `loss_mask`)."""
    id_type = schema.field(TOKENS).type.value_type
    if packing["kind"] == "tokens":
        return PackSpec(packing["seq_len"], id_type)
    target = "labels" if "labels" in schema.names else "loss_mask"
    return ChatPackSpec(packing["seq_len"], id_type, target)


def _pieces(table: pa.Table, keys: list[str] | None, spec: PackSpec) -> Iterator[Piece]:
    """Each row's pieces of documents, in order, with the row's partition key (a
    conversation is whole in its row: one piece, with its loss column)."""
    chat = isinstance(spec, ChatPackSpec)
    tokens_of = table.column(TOKENS).to_numpy(zero_copy_only=False)
    ids_of = table.column("doc_ids").to_pylist()
    if chat:
        assert isinstance(spec, ChatPackSpec)
        targets = table.column(spec.target).to_numpy(zero_copy_only=False)
        for r, cu in enumerate(table.column(CU_SEQLENS).to_pylist()):
            key = keys[r] if keys is not None else ""
            for doc, a, b in zip(ids_of[r], cu[:-1], cu[1:], strict=True):
                target = np.asarray(targets[r][a:b])
                yield Piece(doc, np.asarray(tokens_of[r][a:b]), 0, key, target)
        return
    starts_of = table.column("doc_starts").to_pylist()
    befores_of = table.column("doc_offsets").to_pylist()
    for r, tokens in enumerate(tokens_of):
        starts = starts_of[r]
        ends = [*starts[1:], len(tokens)]
        key = keys[r] if keys is not None else ""
        for doc, a, b, before in zip(ids_of[r], starts, ends, befores_of[r], strict=True):
            yield Piece(doc, np.asarray(tokens[a:b]), int(before), key)


def _joined(pieces: list[Piece]) -> list[Piece]:
    """Consecutive pieces of one document (cut by a row's end) as one."""
    out: list[Piece] = []
    for p in pieces:
        last = out[-1] if out else None
        if last is not None and last.id == p.id and last.before + len(last.tokens) == p.before:
            out[-1] = Piece(p.id, np.concatenate([last.tokens, p.tokens]), last.before, last.key,
                            last.target)  # fmt: skip
        else:
            out.append(p)
    return out


def _attribute(
    source: Path, manifest: dict[str, Any], tail: list[Piece], owner: dict[str, str]
) -> None:
    """The partition of each document wholly in the tail shard, from the lineage."""
    wanted = {p.id for p in tail} - set(owner)
    if not wanted:
        return
    with pa.memory_map(str(source / DOCUMENTS)) as f:
        lineage = pa.ipc.open_file(f).read_all()
    inputs = [i["name"] for i in manifest["inputs"]]
    parts: dict[str, list[dict[str, Any]]] = {}
    for p in manifest["partitions"]:
        parts.setdefault(p["input"], []).append(p)
    for row in lineage.select(["id", "input", "offset"]).to_pylist():
        if row["id"] not in wanted:
            continue
        candidates = parts.get(inputs[row["input"]], [])
        if len(candidates) == 1:
            owner[row["id"]] = candidates[0]["key"]
            continue
        at = row["offset"]
        hit = [c for c in candidates if c["unit"] == "bytes" and at is not None
               and c["start"] <= at < c["stop"]]  # fmt: skip
        if len(hit) != 1:
            raise CannotRepack(f"document {row['id']!r}: its partition cannot be told")
        owner[row["id"]] = hit[0]["key"]
    if wanted - set(owner):
        raise CannotRepack("a tail document has no lineage")


def _packed(
    spec: PackSpec, split: str | None, key: str, docs: list[Piece]
) -> tuple[list[tuple[pa.RecordBatch, int]], list[Piece]]:
    """A partition's documents (of one split) packed again by the packer that packed them:
    its full rows (with the documents each batch ends) and its new tail."""
    packer = spec.start(key, f"pack-{split}" if split else "pack")
    dtype = spec.id_type.to_pandas_dtype()
    out: list[tuple[pa.RecordBatch, int]] = []
    for group in _groups(docs, GROUP_BYTES // np.dtype(dtype).itemsize):
        out += list(packer.feed(_batch(spec, group, tail=False)))
    tail = packer.tail()
    chat = isinstance(spec, ChatPackSpec)
    targets = tail.column(spec.target).to_pylist() if isinstance(spec, ChatPackSpec) else None
    left = []
    ids, tokens_of = tail.column("id").to_pylist(), tail.column(TOKENS).to_pylist()
    for r, (doc, tokens) in enumerate(zip(ids, tokens_of, strict=True)):
        before = 0 if chat else int(tail.column(DOC_OFFSET)[r].as_py())
        target = np.asarray(targets[r]) if targets is not None else None
        left.append(Piece(doc, np.asarray(tokens), before, "", target))
    return out, left


def _batch(spec: PackSpec, docs: list[Piece], tail: bool) -> pa.RecordBatch:
    """Documents as the packer takes them (`tail`: as a partition's tail is staged)."""
    dtype = spec.id_type.to_pandas_dtype()
    columns: dict[str, pa.Array] = {
        "id": pa.array([d.id for d in docs], pa.string()),
        TOKENS: pa.array([d.tokens.astype(dtype) for d in docs], pa.list_(spec.id_type)),
    }
    if isinstance(spec, ChatPackSpec):
        kind = spec.target_type()
        columns[spec.target] = pa.array(
            [np.asarray(d.target).astype(kind.to_pandas_dtype()) for d in docs], pa.list_(kind)
        )
    elif tail:
        columns[DOC_OFFSET] = pa.array([d.before for d in docs], pa.int64())
    schema = spec.tail_schema() if tail else None
    return pa.record_batch(columns, schema=schema)


def _write_rows(
    rows: list[tuple[pa.RecordBatch, int]],
    split: str | None,
    key: str,
    target: Path,
    shard_bytes: int,
    mode: int,
) -> list[dict[str, Any]]:
    """A partition's rows into its own shards, cut as the shard writer cuts them."""
    folder = target / split / "shards" if split else target / "shards"
    folder.mkdir(parents=True, exist_ok=True)
    schema = rows[0][0].schema if rows else None
    if schema is None:
        return []
    writer = ShardWriter(folder, key, schema, shard_bytes, file_mode=mode,
                         relative_to=target, split=split)  # fmt: skip
    for batch, ended in rows:
        writer.write(batch, documents=ended)
    infos: list[ShardInfo] = writer.close()
    return [info.to_dict() | {"split": split} for info in infos]


def _groups(docs: list[Piece], tokens: int) -> Iterator[list[Piece]]:
    """Documents fed to the packer in batches of about `tokens` (the shard writer closes a
    shard after the batch that passes its size, as it does in a run)."""
    group: list[Piece] = []
    held = 0
    for doc in docs:
        group.append(doc)
        held += len(doc.tokens)
        if held >= tokens:
            yield group
            group, held = [], 0
    if group:
        yield group


def _pack_tails(
    spec: PackSpec, split: str | None, stream: list[Piece], target: Path, mode: int
) -> list[TailShard]:
    """A split's tail shard packed again from its tail stream (written to a scratch file
    the packer reads, then removed)."""
    if not stream:
        return []
    scratch = target / ".tail-stream.arrow"
    table = pa.Table.from_batches([_batch(spec, stream, tail=True)])
    write_table(scratch, table, fsync=False)
    try:
        return pack_tails(spec, [(split, scratch)], target, [split], file_mode=mode)
    finally:
        scratch.unlink()

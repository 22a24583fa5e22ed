"""An earlier version rewritten without the forgotten documents (`gc --purge-forgotten`).

A version that still holds a forgotten document is rewritten, not removed. Every file that
holds one is written anew without it; every other file is hard-linked from the version as
it was, so the bytes the version shares with others stay shared:

- shards of one row per document lose those rows; packed shards (a document's tokens run
  over rows, shards and the tail shard) have the partitions holding one packed again from
  their documents' token ids, never tokenized again (`curate.forget.repack`);
- `rejected/`, `examples/` (by the id's hash) and `quarantine/` (by file and offset) lose
  their rows; the lineage side table is joined again to where each document is now;
- the manifest says what went (`counts`, `forgotten.purged`) and lists the new files' sizes
  and checksums (and the packing record); the card and the datasets files are written
  again from it, so the version verifies.

A version built from the same inputs by the same recipe comes out as the version `curate
forget` published, byte for byte; in general, as a build of its own recipe with the
exclusions would be, as long as the inputs it was built from are what they were. It is
built beside the version and swapped in by two renames (`curate.gc.rewrite_named`), and
leaves `.index`: it no longer holds what its fingerprint builds. A file hard-linked into
several versions is rewritten in each (every version stays whole on its own). Not
rewritten, but removed as before: mixtures (an index of other versions' rows), and packed
versions where a tail document's partition cannot be told (`unfit`, `CannotRepack`).
`statistics.json` keeps its figures (no document in them can be told apart).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate.excluded_rows import hits
from curate.forget.repack import repack
from curate.forget.where import read_arrow
from curate.lineage.table import DOCUMENTS
from curate.output.shards import write_table


def unfit(manifest: dict[str, Any]) -> str | None:
    """Why this version cannot be rewritten row by row (None: it can)."""
    names = {f["name"] for f in manifest.get("schema") or []}
    if manifest.get("mixture") is not None:
        return "a mixture (an index of other versions' rows)"
    if "id" not in names:
        return "its shards have no id column"
    return None


class Rewrite:
    """The version at `source` written into `target` (a new folder) without the rows of the
    forgotten ids (`keys`: their hashes, as examples name them) and quarantine listings."""

    def __init__(
        self,
        source: Path,
        target: Path,
        ids: tuple[str, ...],
        keys: tuple[str, ...],
        lines: frozenset[tuple[str, int]],
    ) -> None:
        self.source, self.target = source, target
        self.ids, self.keys, self.lines = ids, keys, lines
        self.manifest: dict[str, Any] = json.loads((source / "manifest.json").read_text())
        mode = os.stat(source / "manifest.json").st_mode & 0o777
        self.file_mode = mode | 0o200  # written, then sealed read-only again
        self.read_only = mode & 0o444
        self.removed = 0  # documents gone from the shards

    def run(self) -> int:
        """Write the new version; the documents it lost."""
        m = self.manifest
        written: set[str] = {"manifest.json"}
        written.update(s["path"] for s in m["shards"])
        if m.get("packing") is not None:
            self._packed(written)
        else:
            for record in m["shards"]:
                self._shard(record)
        for kind in ("rejected", "examples", "quarantine"):
            for record in m.get(kind) or []:
                written.add(record["path"])
                self._side(record, kind)
        if m.get("lineage") and self.removed:
            written.update(r["path"] for r in m["lineage"])
            self._lineage()
        self._link_rest(written)
        self._manifest()
        return self.removed

    # -- files --------------------------------------------------------------------------
    def _packed(self, written: set[str]) -> None:
        """Packed rows: the partitions holding a forgotten document packed again
        (`curate.forget.repack`), the other shards linked."""
        from curate.accounting import packing_record
        from curate.hf_layout import hf_files, write_layout
        from curate.manifest import FileRecord

        m = self.manifest
        old = {s["path"]: s for s in m["shards"]}
        done = repack(self.source, self.target, m, frozenset(self.ids), self.file_mode)
        if done is None:
            for path in old:
                self._link(path)
            return
        for s in done.shards:
            if old.get(s["path"]) == s:  # the same bytes: the same file, shared as before
                (self.target / s["path"]).unlink(missing_ok=s["path"] not in done.written)
                self._link(s["path"])
        m["shards"] = done.shards
        records = [FileRecord(**s) for s in done.shards]
        packing = packing_record(done.spec, records, done.tails)
        m["packing"] = packing.model_dump(mode="json") if packing is not None else None
        m["tokens"] = sum(s.get("tokens") or 0 for s in done.shards)
        self.removed = done.removed
        names = list((m.get("splits") or {}).get("splits") or [])
        layout = m.get("layout")  # the version keeps its layout (a legacy one too)
        shards = [(s["path"], s.get("split")) for s in done.shards]
        write_layout(self.target, shards, names, layout, m["fingerprint"])
        written.update(hf_files(names, layout))
        written.update(s["path"] for s in done.shards)

    def _shard(self, record: dict[str, Any]) -> None:
        table = read_arrow(self.source / record["path"])
        hit = hits(table, self.ids) if self.ids and table is not None else None
        n = int(pc.sum(hit).as_py() or 0) if hit is not None else 0
        if not n:
            self._link(record["path"])
            return
        assert hit is not None and table is not None
        table = table.filter(pc.invert(hit))
        info = self._write(record["path"], table)
        record.update(rows=table.num_rows, bytes=info.bytes, sha256=info.sha256)
        if record.get("tokens") is not None and "num_tokens" in table.schema.names:
            record["tokens"] = int(pc.sum(table.column("num_tokens")).as_py() or 0)
        self.removed += n

    def _side(self, record: dict[str, Any], kind: str) -> None:
        table = read_arrow(self.source / record["path"])
        if table is None:
            self._link(record["path"])
            return
        keep = pa.array(np.ones(table.num_rows, dtype=bool))
        names = table.schema.names
        if kind == "quarantine" and self.lines:
            where = zip(table.column("file").to_pylist(), table.column("offset").to_pylist(),
                        strict=True)  # fmt: skip
            keep = pa.array([(f, o) not in self.lines for f, o in where])
        elif kind == "rejected" and "id" in names and self.ids:
            keep = pc.invert(hits(table, self.ids))
        elif kind == "examples" and self.keys:
            for column in ("key", "kept_key"):
                if column in names:
                    keep = pc.and_(keep, pc.invert(hits(table, self.keys, column)))
        if bool(pc.all(keep).as_py()):
            self._link(record["path"])
            return
        table = table.filter(keep)
        info = self._write(record["path"], table)
        record.update(bytes=info.bytes, sha256=info.sha256)
        if "rows" in record:
            record["rows"] = table.num_rows

    def _lineage(self) -> None:
        """The side table less the forgotten documents, each joined again to where it is in
        the shards now (rows moved up, or packed again), by the very code a build publishes
        it with (`curate.lineage.publish.write_lineage`, its rows as the staged rows a build
        reads), so the bytes are a build's."""
        from curate.lineage.publish import write_lineage
        from curate.manifest import FileRecord
        from curate.output.lineage_rows import STAGED_SCHEMA

        table = read_arrow(self.source / DOCUMENTS)
        assert table is not None
        sources = table.filter(pc.invert(hits(table, self.ids)))
        sources = sources.select([*STAGED_SCHEMA.names, "input"])
        shards = [FileRecord(**s) for s in self.manifest["shards"]]
        records = write_lineage(self.target, lambda: [sources], shards, fsync=True,
                                file_mode=self.file_mode)  # fmt: skip
        self.manifest["lineage"] = [r.model_dump(mode="json") for r in records]

    def _write(self, rel: str, table: pa.Table) -> Any:
        path = self.target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        return write_table(path, table, fsync=True, file_mode=self.file_mode)

    def _link(self, rel: str) -> None:
        path = self.target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        os.link(self.source / rel, path, follow_symlinks=False)

    def _link_rest(self, written: set[str]) -> None:
        """Every other file of the version (statistics, the datasets layout files), linked;
        the card is written again with the manifest."""
        card = (self.manifest.get("card") or {}).get("path")
        for path in sorted(p for p in self.source.rglob("*") if p.is_file()):
            rel = path.relative_to(self.source).as_posix()
            if rel not in written and rel != card and not (self.target / rel).exists():
                self._link(rel)

    # -- the manifest -------------------------------------------------------------------
    def _manifest(self) -> None:
        from curate.manifest import Manifest
        from curate.output.card import write_card

        m = self.manifest
        counts = m["counts"]
        counts["written"] -= self.removed
        removed = counts["removed"].setdefault("forget", {})
        removed["forgotten"] = removed.get("forgotten", 0) + self.removed
        counts["removed_total"] += self.removed
        tokens = [s.get("tokens") for s in m["shards"]]
        if m.get("tokens") is not None and all(t is not None for t in tokens):
            m["tokens"] = sum(tokens)
        if m.get("splits"):
            for name, split in m["splits"]["splits"].items():
                own = [s for s in m["shards"] if s.get("split") == name]
                split["rows"] = sum(s["rows"] for s in own)
                split["documents"] = sum(s["rows"] if s.get("documents") is None
                                         else s["documents"] for s in own)  # fmt: skip
                split["shards"] = len(own)
                split["bytes"] = sum(s["bytes"] for s in own)
                if split.get("tokens") is not None:
                    split["tokens"] = sum(s.get("tokens") or 0 for s in own)
        m["forgotten"] = {**(m.get("forgotten") or {}), "purged": self.removed}
        if m.get("card") is not None:
            card = write_card(self.target, Manifest.model_validate(m), mode=self.file_mode,
                              fsync=True)  # fmt: skip
            m["card"] = card.model_dump(mode="json")
        path = self.target / "manifest.json"
        path.write_text(Manifest.model_validate(m).model_dump_json(indent=2, by_alias=True) + "\n")
        dir_mode = os.stat(self.source).st_mode & 0o777
        for item in sorted(self.target.rglob("*"), reverse=True):  # sealed like the rest
            if item.is_dir() and not item.is_symlink():
                os.chmod(item, dir_mode)
            elif item.is_file() and os.stat(item).st_nlink == 1:  # (links: already)
                os.chmod(item, self.read_only)

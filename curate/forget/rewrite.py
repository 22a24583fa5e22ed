"""An earlier version rewritten without the forgotten documents (`gc --purge-forgotten`).

A version that still holds a forgotten document is rewritten, not removed, when each of its
files can lose the document's rows on its own: its shards hold one row per document (an
`id` column). Every file that holds one is written anew without those rows (shards,
`rejected/`, `examples/`, `quarantine/`, and the lineage side table with each row number
shifted past the rows gone); every other file is hard-linked from the version as it was, so
the bytes the version shares with others stay shared; the manifest says what went
(`counts`, `forgotten.purged`), lists the new files' sizes and checksums, and the card is
written again from it, so the version verifies. It is built beside the version and swapped
in by two renames (`curate.gc.replace_version`). A file hard-linked into several versions
is rewritten in each of them (each gets its own copy: every version stays whole on its own).

A version of packed rows (a document's tokens spread over rows and shards, and rows filled
from the next document) cannot lose a document without packing its partition again from
the documents' token ids, nor a mixture (an index of another version's rows): those are
removed as before (`unfit` says why). The rewritten version no longer holds what its
fingerprint builds, so its `.index` entry goes: no run finds it by fingerprint.
`statistics.json` keeps its figures (histograms: no document in them can be told apart).
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
from curate.lineage.publish import write_lineage_table
from curate.lineage.table import DOCUMENTS
from curate.output.shards import write_table

PACKED = ("doc_ids", "cu_seqlens")


def unfit(manifest: dict[str, Any]) -> str | None:
    """Why this version cannot be rewritten row by row (None: it can)."""
    names = {f["name"] for f in manifest.get("schema") or []}
    if manifest.get("mixture") is not None:
        return "a mixture (an index of other versions' rows)"
    if manifest.get("packing") is not None or names & set(PACKED):
        return "packed rows (its partitions would have to be packed again)"
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
        self.kept: dict[int, np.ndarray] = {}  # shard index -> which of its rows stay

    def run(self) -> int:
        """Write the new version; the documents it lost."""
        m = self.manifest
        written: set[str] = {"manifest.json"}
        for i, record in enumerate(m["shards"]):
            written.add(record["path"])
            self._shard(i, record)
        for kind in ("rejected", "examples", "quarantine"):
            for record in m.get(kind) or []:
                written.add(record["path"])
                self._side(record, kind)
        if m.get("lineage") and self.kept:
            written.update(r["path"] for r in m["lineage"])
            self._lineage()
        self._link_rest(written)
        self._manifest()
        return self.removed

    # -- files --------------------------------------------------------------------------
    def _shard(self, index: int, record: dict[str, Any]) -> None:
        table = _read(self.source / record["path"])
        hit = hits(table, self.ids) if self.ids and table is not None else None
        n = int(pc.sum(hit).as_py() or 0) if hit is not None else 0
        if not n:
            self._link(record["path"])
            return
        assert hit is not None and table is not None
        self.kept[index] = ~np.asarray(hit.to_numpy(zero_copy_only=False), dtype=bool)
        table = table.filter(pc.invert(hit))
        info = self._write(record["path"], table)
        record.update(rows=table.num_rows, bytes=info.bytes, sha256=info.sha256)
        if record.get("tokens") is not None and "num_tokens" in table.schema.names:
            record["tokens"] = int(pc.sum(table.column("num_tokens")).as_py() or 0)
        self.removed += n

    def _side(self, record: dict[str, Any], kind: str) -> None:
        table = _read(self.source / record["path"])
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
        """The side table less the forgotten documents, each row number in a rewritten shard
        moved up past the rows gone before it."""
        table = _read(self.source / DOCUMENTS)
        assert table is not None
        table = table.filter(pc.invert(hits(table, self.ids)))
        shard = table.column("shard").to_numpy()
        row = table.column("row").to_numpy().copy()
        for index, kept in self.kept.items():
            new = np.cumsum(kept) - 1  # old row -> new row, for the rows that stay
            at = shard == index
            row[at] = new[row[at]]
        table = table.set_column(table.schema.get_field_index("row"), "row", pa.array(row))
        (self.target / "lineage").mkdir(exist_ok=True)
        records = write_lineage_table(self.target, table, fsync=True, file_mode=self.file_mode)
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
                split["documents"] = split["rows"] = sum(s["rows"] for s in own)
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


def _read(path: Path) -> pa.Table | None:
    for opener in (pa.ipc.open_stream, pa.ipc.open_file):
        try:
            with pa.memory_map(str(path)) as source:
                return opener(source).read_all()
        except (pa.ArrowInvalid, OSError):
            continue
    return None

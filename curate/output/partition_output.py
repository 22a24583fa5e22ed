"""One partition's final rows into shards: split by id when asked, packed when asked.

The engine hands every surviving row of a partition, in input order, to one
`PartitionOutput`. With a `split:` it routes each document to its split first (a seeded
hash of the id, `curate.output.splits`), so each split has its own shard writer and its own
packer, and packed rows never mix splits; without one there is a single writer, exactly
as before. Shards go to `<folder>/shards/` or `<folder>/<split>/shards/`, named by the
partition's key (`Partition.key`), so the output never depends on how many workers ran,
nor on which other inputs a run has.

Completed shards are handed back (`take`) at the points the engine checkpoints (closing
every split's open shard there), and the packers' carried rows pickle (`state`/
`restore`), so a resumed partition continues exactly where it stopped. A packed
partition's short last row never reaches its shards: `finish` closes them on full rows
and `tails` hands back, per split, what that row would hold, for the engine to stage
(`curate.output.tails` packs every partition's tail into one shard at publish).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from curate.io.batches import LINEAGE
from curate.output.lineage_rows import StagedLineage
from curate.output.packing import PackSpec
from curate.output.shards import ShardWriter
from curate.output.splits import SplitSpec


class PartitionOutput:
    def __init__(
        self,
        folder: Path,
        partition: str,
        schema: pa.Schema,
        target_bytes: int,
        *,
        packing: PackSpec | None = None,
        split: SplitSpec | None = None,
        done: list[dict[str, Any]] | None = None,
        fsync: bool = True,
        file_mode: int = 0o640,
        relative_to: Path | None = None,
        lineage: Path | None = None,
        lineage_done: int = 0,
    ) -> None:
        self.split = split
        self.lineage = None  # each document's id and place, staged in `lineage` for publish
        if lineage is not None:
            self.lineage = StagedLineage(lineage, partition, done=lineage_done, fsync=fsync,
                                         file_mode=file_mode, relative_to=relative_to)  # fmt: skip
        self.names: list[str | None] = list(split.names()) if split is not None else [None]
        self.writers: dict[str | None, ShardWriter] = {}
        self.packers: dict[str | None, Any] = {}
        done = done or []
        for name in self.names:
            shards = folder / name / "shards" if name else folder / "shards"
            shards.mkdir(parents=True, exist_ok=True)
            self.writers[name] = ShardWriter(
                shards, partition, schema, target_bytes, fsync=fsync, file_mode=file_mode,
                relative_to=relative_to, split=name,
                first_index=sum(1 for s in done if s.get("split") == name),
            )  # fmt: skip
            if packing is not None:
                self.packers[name] = packing.start(partition, f"pack-{name}" if name else "pack")

    def write(self, rows: pa.RecordBatch) -> None:
        if self.split is None:
            self._write(None, rows)
            return
        which = self.split.assign(rows.column("id"))
        for k, name in enumerate(self.names):
            mask = which == k
            if mask.all():
                self._write(name, rows)
            elif mask.any():
                self._write(name, rows.filter(pa.array(mask)))

    def _write(self, name: str | None, rows: pa.RecordBatch) -> None:
        if self.lineage is not None:
            self.lineage.add(name, rows)
        rows = rows.drop_columns([c for c in LINEAGE if c in rows.schema.names])
        writer, packer = self.writers[name], self.packers.get(name)
        if packer is None:
            writer.write(rows)
            return
        for packed, ended in packer.feed(rows):
            writer.write(packed, documents=ended)

    def finish(self) -> list[dict[str, Any]]:
        """Close every writer; the shards not yet taken (packers keep their tails)."""
        for name in self.names:
            self.writers[name].close()
        return self.take()

    def tails(self) -> dict[str | None, pa.RecordBatch]:
        """Per split, what the packer's short last row would hold (splits with none left out);
        the packers are empty afterwards."""
        out = {}
        for name, packer in self.packers.items():
            tail = packer.tail()
            if tail.num_rows:
                out[name] = tail
        return out

    def completed(self) -> bool:
        return any(w.shards for w in self.writers.values())

    def take(self) -> list[dict[str, Any]]:
        """Shards completed since the last call, split by split (each writer's in order).

        Called at a checkpoint, which the engine takes when a shard completes: every other
        split's open shard is closed too, since a resumed run restarts after the last chunk
        and would never rewrite the rows an open shard held. The cut points depend only on
        the data, so an interrupted run and an uninterrupted one cut at the same places.
        """
        if self.lineage is not None:
            self.lineage.flush()
        out = []
        for writer in self.writers.values():
            writer.close()
            out += [s.to_dict() for s in writer.shards]
            writer.first_index += len(writer.shards)
            writer.shards = []
        return out

    def take_lineage(self) -> list[dict[str, Any]]:
        """The lineage files staged by `take` (and `finish`) since the last call."""
        return self.lineage.take() if self.lineage is not None else []

    def state(self) -> dict[str, Any]:
        """The packers' carried rows, to pickle with a checkpoint."""
        return {str(name): p.__dict__ for name, p in self.packers.items()}

    def restore(self, state: dict[str, Any]) -> None:
        for name, packer in self.packers.items():
            packer.__dict__.update(state[str(name)])

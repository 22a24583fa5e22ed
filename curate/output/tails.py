"""The tail shard: every packed partition's short last row, packed together at publish.

A packed partition writes full rows only. What its short last row would hold (its tail:
pieces of documents, or whole conversations) is staged beside its record
(`Staging.tail`), written before the record as its other files are, so a resumed
partition stages the same bytes. At publish the tails of every partition are read in
partition order and packed into one shard per split, `shards/tail-00000.arrow` (with a
split: `<split>/shards/tail-00000.arrow`), whose own last row is the only short one left.
Nothing else crosses partitions, and the name holds no run-wide index: only this shard
changes when a partition is added or removed.

Its rows are named `pack-tail-RRRRRRRRR` (`pack-<split>-tail-...`); a piece continuing a
document begun in a partition's last full row says so in `doc_offsets`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from curate.output.packing import NUM_TOKENS, PackSpec
from curate.output.shards import ShardInfo, read_stream, write_batches

TAIL_SHARD = "tail-00000.arrow"
_BATCH_BYTES = 4 << 20


@dataclass(frozen=True)
class TailShard:
    """One split's tail shard, and the tokens of its last row when that row is short."""

    info: ShardInfo  # path relative to the version folder
    short_tokens: int


def pack_tails(
    spec: PackSpec,
    staged: Sequence[tuple[str | None, Path]],
    out: Path,
    splits: Sequence[str | None],
    *,
    fsync: bool = True,
    file_mode: int = 0o640,
) -> list[TailShard]:
    """The tail shard of each split that has tails, written into the version folder `out`
    being built, from the staged tail files `(split, path)` in partition order."""
    found = []
    for split in splits:
        paths = [path for s, path in staged if s == split]
        if paths:
            found.append(_pack(spec, paths, out, split, fsync, file_mode))
    return found


def _pack(
    spec: PackSpec,
    paths: list[Path],
    out: Path,
    split: str | None,
    fsync: bool,
    file_mode: int,
) -> TailShard:
    packer = spec.start_tail(f"pack-{split}" if split else "pack")
    folder = out / split / "shards" if split else out / "shards"
    folder.mkdir(parents=True, exist_ok=True)
    tally = {"tokens": 0, "documents": 0, "last": 0}

    def count(rows: pa.RecordBatch, ended: int) -> pa.RecordBatch:
        tally["tokens"] += int(pc.sum(rows.column(NUM_TOKENS)).as_py() or 0)
        tally["documents"] += ended
        tally["last"] = int(rows.column(NUM_TOKENS)[-1].as_py())
        return rows

    def packed() -> Iterator[pa.RecordBatch]:
        for path in paths:
            for batch in read_stream(path).to_batches():
                for rows, ended in packer.feed(batch):
                    yield count(rows, ended)
        for rows, ended in packer.flush():
            yield count(rows, ended)

    def rows() -> Iterator[pa.RecordBatch]:
        """A tail yields a row or two: joined into batches of about _BATCH_BYTES, so a tail
        shard of ten thousand partitions is not ten thousand record batches."""
        held: list[pa.RecordBatch] = []
        size = 0
        for batch in packed():
            held.append(batch)
            size += batch.nbytes
            if size >= _BATCH_BYTES:
                yield pa.concat_batches(held)
                held, size = [], 0
        if held:
            yield pa.concat_batches(held)

    info = write_batches(folder / TAIL_SHARD, spec.output_schema(), rows(), fsync=fsync,
                         file_mode=file_mode, relative_to=out)  # fmt: skip
    info = replace(info, tokens=tally["tokens"], documents=tally["documents"], split=split)
    last = tally["last"]
    return TailShard(info, last if 0 < last < spec.seq_len else 0)

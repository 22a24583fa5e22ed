"""The local engine's collective operations: the same decision whether a shuffle fits in
memory as one piece or is cut into many spilled buckets; decisions land per partition."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from curate.collective.local import LocalSummaries
from curate.engines.barrier_step import write_decision
from curate.io.batches import with_partition
from curate.minhash.planted import planted_corpus
from curate.output.shards import read_stream
from curate.stages.base import DECISION_SCHEMA, ORDER
from curate.stages.minhash_dedup import MinHashDedup, MinHashDedupParams
from curate.staging.names import Staging


def spilled_summaries(folder: Path, stage: MinHashDedup, partitions: int) -> list[tuple[Path, int]]:
    """The planted corpus cut into partitions, each summary spilled as a worker would."""
    docs = planted_corpus(bases=120, seed=5).docs
    files = []
    for p, chunk in enumerate(np.array_split(np.arange(len(docs)), partitions)):
        order = (np.uint64(p) << np.uint64(40)) + np.arange(len(chunk), dtype=np.uint64)
        batch = pa.record_batch(
            {
                "id": [docs[i]["id"] for i in chunk],
                "text": [docs[i]["text"] for i in chunk],
                ORDER: pa.array(order, pa.uint64()),
            }
        )
        summary = stage.summarize(batch)
        path = folder / f"summary-{p:05d}.arrow"
        with pa.ipc.new_file(str(path), summary.schema) as w:
            w.write_batch(summary)
        files.append((path, p))
    return files


def test_spilled_buckets_decide_as_one_piece_does(tmp_path: Path) -> None:
    stage = MinHashDedup(MinHashDedupParams())
    files = spilled_summaries(tmp_path, stage, partitions=6)

    whole = LocalSummaries.from_files(files, tmp_path / "spill-a")
    expected = stage.decide(whole).collect(DECISION_SCHEMA)
    details = stage.describe()
    assert expected.num_rows > 20 and details["clusters"] > 10

    cut = LocalSummaries.from_files(files, tmp_path / "spill-b")
    cut.budget, cut.spill_bytes = 4096, 512  # every shuffle in many buckets, pieces on disk
    decision = stage.decide(cut)
    assert any((tmp_path / "spill-b").iterdir())
    (tmp_path / "pass-1").mkdir()
    keys = [f"key{p}" for p in range(6)]
    assert write_decision(decision, tmp_path, 1, keys, fsync=False) == (expected.num_rows, 0)
    cut.close()
    assert not (tmp_path / "spill-b").exists()
    assert stage.describe() == details | {"decide_seconds": stage.describe()["decide_seconds"]}

    written = []
    for p in range(6):  # each partition's file holds its own rows only, sorted by `_order`,
        path = Staging(tmp_path).decision(1, f"key{p}")  # named by the partition's key
        if path.exists():
            table = read_stream(path)
            orders = table.column(ORDER).to_numpy()  # the row within the partition alone:
            assert (orders >> np.uint64(40) == 0).all() and (np.diff(orders) > 0).all()
            written.append(with_partition(table, p))  # the run's index is put back on reading
    assert pa.concat_tables(written).equals(expected.sort_by(ORDER).cast(DECISION_SCHEMA))

"""Every engine starts a pass's tasks largest first (`engines.base.costliest_first`), so the
partition that runs alone at the end, when other workers have nothing left, is a small one;
ties keep the plan's order, and only the order of starting changes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from curate.engines.base import costliest_first
from curate.io.inputs import discover_inputs
from curate.io.partitions import plan_partitions
from curate.staging.record import PartitionRecord


def _tasks(parts: list[Any], pass_index: int = 0) -> list[Any]:
    return [SimpleNamespace(pass_index=pass_index, partition=p) for p in parts]


def _write(path: Path, sizes: list[int]) -> None:
    lines = [json.dumps({"id": str(i), "text": "x" * n}) for i, n in enumerate(sizes)]
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)


def test_first_pass_starts_the_largest_byte_ranges_first(tmp_path: Path) -> None:
    _write(tmp_path / "a.jsonl", [900, 100, 5000, 100, 2500, 100])
    _write(tmp_path / "b.jsonl.gz", [300] * 50)  # a stream: its file's size
    files = discover_inputs(["*.jsonl", "*.jsonl.gz"], tmp_path)
    parts = plan_partitions(files, 1000)
    ordered = [t.partition for t in costliest_first(_tasks(parts), [])]
    assert sorted(p.key for p in ordered) == sorted(p.key for p in parts)  # none lost
    sizes = [p.stop - p.start if p.input.format == "jsonl" else p.input.size for p in ordered]
    assert sizes == sorted(sizes, reverse=True)
    big = max(parts, key=lambda p: p.stop - p.start if p.input.format == "jsonl" else 0)
    assert ordered[0] is big  # the 5000-character document's partition


def test_ties_keep_the_plan_order_and_later_passes_go_by_staged_rows(tmp_path: Path) -> None:
    _write(tmp_path / "a.jsonl", [100] * 40)
    parts = plan_partitions(discover_inputs(["a.jsonl"], tmp_path), 400)
    assert len(parts) >= 4
    equal = [t.partition for t in costliest_first(_tasks(parts), [])]
    sizes = [p.stop - p.start for p in parts]
    assert len(set(sizes)) < len(sizes)  # partitions of equal size: in the plan's order
    assert equal == sorted(parts, key=lambda p: -(p.stop - p.start))  # (a stable sort)
    records = []
    for i, p in enumerate(parts):  # after a barrier: the rows each partition staged
        rec = PartitionRecord(p.key, 0, p.input.name)
        rec.files.segments = [{"rows": i % 3}]
        records.append(rec)
    later = [t.partition for t in costliest_first(_tasks(parts, 1), records)]
    rows = [i % 3 for i in range(len(parts))]
    assert later == [parts[i] for i in sorted(range(len(parts)), key=lambda i: -rows[i])]

"""The default partition size: one large file gives every worker work (issue 16, point 2).

How busy workers stay on a real recipe is measured, not tested:
benchmarks/partition_parallelism.py (2 workers on one 300 MB JSONL file) and
benchmarks/partition_startup.py (what one partition more costs).
"""

from __future__ import annotations

from pathlib import Path

from curate.io.inputs import discover_inputs
from curate.io.partitions import plan_partitions
from curate.recipe import Recipe

MB = 10**6


def plan_with_defaults(tmp_path: Path, workers: int, size: int) -> list[tuple[int, int]]:
    """Byte ranges the recipe's default partition size cuts one JSONL file of `size` into."""
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    path = data / "big.jsonl"
    if not path.exists():
        line = b'{"text": "' + b"word " * 200 + b'"}\n'
        path.write_bytes(line * (size // len(line)))
    recipe = tmp_path / f"recipe-{workers}.yaml"
    recipe.write_text(
        f"name: x\ninputs: [data/big.jsonl]\nengine: {{kind: local, workers: {workers}}}\n"
    )
    r = Recipe.load(recipe)
    files = discover_inputs(r.inputs, r.base_dir)
    return [(p.start, p.stop) for p in plan_partitions(files, r.partition_size)]


def test_a_95_mb_file_is_enough_partitions_for_two_workers_to_share(tmp_path: Path) -> None:
    """Issue 16: with 128 MB partitions a 95 MB file was one partition, so one of two
    workers did all the work (`pass 3: 0/1`). Workers take partitions as they finish, so
    the others idle for about half a partition's time at the end of each pass: with P
    partitions of like cost on W workers, about W / 2P of the time. Keeping 90% busy
    takes at least 5 partitions per worker."""
    parts = plan_with_defaults(tmp_path, 2, 95 * MB)
    assert len(parts) >= 5 * 2, f"{len(parts)} partitions"


def test_partition_boundaries_do_not_depend_on_the_number_of_workers(tmp_path: Path) -> None:
    plans = {w: plan_with_defaults(tmp_path, w, 40 * MB) for w in (1, 2, 8)}
    assert plans[1] == plans[2] == plans[8]
    assert len(plans[1]) > 1

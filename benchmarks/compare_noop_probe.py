"""Times no-op `curate.prepare(recipe)` calls in this process: the probe compare_commits runs.

Run by file path as ``python -P compare_noop_probe.py RECIPE CALLS`` with
``PYTHONPATH=<tree>`` (it imports nothing from ``benchmarks``, which the tree under test
may not have). Prints one JSON line: the wall and CPU milliseconds of each call. The
first call, which pays the imports, is made before the timed ones and reported apart.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> None:
    recipe, calls = sys.argv[1], int(sys.argv[2])
    started = time.perf_counter()
    import curate

    first = curate.prepare(recipe)
    first_ms = (time.perf_counter() - started) * 1000
    if not first.up_to_date:
        raise SystemExit(f"{recipe} was not built yet: prepare() built it")
    wall, cpu = [], []
    for _ in range(calls):
        w, c = time.perf_counter(), time.process_time()
        version = curate.prepare(recipe)
        cpu.append((time.process_time() - c) * 1000)
        wall.append((time.perf_counter() - w) * 1000)
        assert version.up_to_date
    print(json.dumps({"first_ms": first_ms, "wall_ms": wall, "cpu_ms": cpu}))


if __name__ == "__main__":
    main()

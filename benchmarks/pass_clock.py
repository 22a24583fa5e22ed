"""`curate` with each pass's start and end written down, for benchmarks that split CPU by pass.

    python -m benchmarks.pass_clock <clock.jsonl> run --quiet recipe.yaml

runs curate's CLI (`curate.cli:main`, the `curate` script's entry point) in this process
with `Engine._run_pass` wrapped: when a pass ends, one line `{"pass": k, "start": t0,
"end": t1}` (wall-clock `time.time()`, so another process can line it up with its own
samples) is appended to the file. Nothing else changes: the same passes, the same engine
code, on either engine. The manifest gives each pass's length, not when it ran; a per-core
CPU sampler (`benchmarks.ray_overhead --side-by-side`) needs the moments.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from pathlib import Path
from typing import Any


def install(clock: Path) -> None:
    from curate.engines import base

    run_pass = base.Engine._run_pass

    @functools.wraps(run_pass)
    def timed(self: Any, job: Any, k: int, *args: Any, **kwargs: Any) -> Any:
        start = time.time()
        try:
            return run_pass(self, job, k, *args, **kwargs)
        finally:
            line = json.dumps({"pass": k, "start": start, "end": time.time()})
            with clock.open("a", encoding="utf-8") as out:
                out.write(line + "\n")

    base.Engine._run_pass = timed  # type: ignore[method-assign]


def read(clock: Path) -> dict[str, tuple[float, float]]:
    """pass_k -> (start, end), from a clock file (empty when the run wrote none)."""
    if not clock.exists():
        return {}
    spans = {}
    for line in clock.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        spans[f"pass_{item['pass']}"] = (float(item["start"]), float(item["end"]))
    return spans


def main() -> None:
    clock, args = Path(sys.argv[1]), sys.argv[2:]
    install(clock)
    from curate.cli import main as curate

    sys.argv = ["curate", *args]
    curate()


if __name__ == "__main__":
    main()

"""The two files a benchmark leaves in benchmarks/results/: markdown to read, JSON to reuse.

Every benchmark that pairs rounds (stage_cache, incremental, stats_overhead,
partition_parallelism) ends the same way: a title, what was measured on which tree, the
table of runs, the summary lines, the command that reproduces it, and the runs as JSON.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def save_results(
    name: str, title: str, intro: str, rows: list[str], lines: list[str], command: str,
    runs: list[Any],
) -> Path:  # fmt: skip
    """Write `name`.md and `name`.json; the machine and the time follow `intro`."""
    text = "\n".join(
        [
            f"# {title}",
            "",
            f"{intro}{platform.python_version()}, {os.cpu_count()} cores; "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
            "",
            *rows,
            "",
            *[f"- {line}" for line in lines],
            "",
            f"Command: `{command}`",
            "",
        ]
    )
    path = RESULTS / f"{name}.md"
    path.write_text(text)
    (RESULTS / f"{name}.json").write_text(json.dumps([asdict(r) for r in runs], indent=1) + "\n")
    print(f"wrote {path}")
    return path

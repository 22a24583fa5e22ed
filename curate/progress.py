"""The one progress facility: the CLI renders `progress(phase, done, total)` calls on stderr.

On a terminal the current phase is redrawn in place; otherwise (CI logs, pipes) one
line is written when a phase completes. Library code only calls the function.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class StderrProgress:
    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.started: dict[str, float] = {}

    def __call__(self, phase: str, done: int, total: int) -> None:
        now = time.perf_counter()
        start = self.started.setdefault(phase, now)
        line = f"{phase}: {done}/{total} ({now - start:.1f}s)"
        if self.tty:
            end = "\n" if done >= total else ""
            self.stream.write(f"\r\033[K{line}{end}")
            self.stream.flush()
        elif done >= total:
            self.stream.write(line + "\n")
            self.stream.flush()

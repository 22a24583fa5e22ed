"""The one progress facility: engines report, a renderer the caller chose draws.

Engines call `progress(phase, done, total)` as partitions complete (any callable will do,
`curate.run(progress=...)`), and, when the renderer also has a `work` method (`Detailed`),
`progress.work(phase, done, total, Work(...))` a few times a second with what the running
partitions have done so far (documents and bytes, read from the workers' progress files by
`curate.engines.work_meter`) and, for a barrier's decision, which step it is on. A barrier's
`decide` names its steps with `step(...)`, which reaches the renderer of the run deciding.

Two renderers: `StderrProgress` (the CLI's: redrawn in place on a terminal at most every
`every` seconds, one line per phase when it completes otherwise, as in CI logs), and
`TqdmProgress` (bars; in a notebook `tqdm.auto` draws widgets). `auto()` is what
`curate.run` uses when given none: bars in a notebook, silence elsewhere (library code
never prints; the CLI chooses stderr).
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO, runtime_checkable

EVERY = 0.25
"""Seconds between progress updates (workers' files, the driver's polls, redraws), unless
CURATE_PROGRESS_EVERY says otherwise."""


def interval() -> float:
    """The update interval: CURATE_PROGRESS_EVERY (seconds) when set, else `EVERY`. An
    environment variable, so that workers in other processes (a pool, Ray) see it too."""
    try:
        return max(0.0, float(os.environ.get("CURATE_PROGRESS_EVERY", EVERY)))
    except ValueError:
        return EVERY


@dataclass(frozen=True)
class Work:
    """What a phase's running and finished partitions did so far in this run."""

    docs: int = 0
    nbytes: int = 0  # first pass over plain files: input bytes read; else Arrow bytes
    docs_total: int | None = None  # known after the first pass (the rows staged for it)
    bytes_total: int | None = None  # first pass, plain files: the partitions' input bytes
    note: str = ""  # a barrier's decision: the step it is on

    def fraction(self) -> float | None:
        """How far along, by documents when their total is known, else by input bytes
        (capped below 1 until done: a partition's last line is counted when it ends)."""
        if self.docs_total:
            return min(1.0, self.docs / self.docs_total)
        if self.bytes_total:
            return min(0.99, self.nbytes / self.bytes_total)
        return None


ProgressFn = Callable[[str, int, int], None]
"""progress(phase, done, total): what engines call as partitions complete."""


def no_progress(phase: str, done: int, total: int) -> None:
    return None


@runtime_checkable
class Detailed(Protocol):
    """A renderer that also takes documents, bytes and steps within a phase."""

    def __call__(self, phase: str, done: int, total: int) -> None: ...

    def work(self, phase: str, done: int, total: int, work: Work) -> None: ...


def report(progress: ProgressFn, phase: str, done: int, total: int, work: Work | None) -> None:
    """Tell `progress` where a phase is, with `work` when it takes it."""
    if work is not None and isinstance(progress, Detailed):
        progress.work(phase, done, total, work)
    else:
        progress(phase, done, total)


# -- a barrier's steps -----------------------------------------------------------------
_STEP: ContextVar[Callable[[str], None] | None] = ContextVar("curate_decide_step", default=None)


def step(note: str) -> None:
    """Say which step a barrier's `decide` is on ("verify: 1,204 candidate pairs"); shown
    by the run's renderer, ignored outside a run. Cheap: call it between steps."""
    told = _STEP.get()
    if told is not None:
        told(note)


@contextmanager
def steps_to(told: Callable[[str], None]) -> Iterator[None]:
    """While the block runs, `step(note)` calls `told(note)`."""
    token = _STEP.set(told)
    try:
        yield
    finally:
        _STEP.reset(token)


# -- rendering ---------------------------------------------------------------------------
def _count(n: float) -> str:
    return f"{n:,.0f}"


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def _clock(seconds: float) -> str:
    s = int(seconds + 0.5)
    return (
        f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
    )


WINDOW = 10.0
"""Seconds of recent work that a running phase's rates and ETA are measured over (the
start of a pass, workers setting up, would otherwise hold them down for the whole run)."""


@dataclass
class _Phase:
    """A phase as drawn: when it started, its latest work, recent (time, docs, bytes,
    fraction) samples."""

    started: float
    work: Work | None = None
    finished: bool = False
    samples: deque[tuple[float, int, int, float | None]] = field(default_factory=deque)

    def sample(self, now: float) -> None:
        if self.work is None:
            return
        self.samples.append((now, self.work.docs, self.work.nbytes, self.work.fraction()))
        while len(self.samples) > 2 and now - self.samples[1][0] >= WINDOW:
            self.samples.popleft()

    def line(self, phase: str, done: int, total: int, now: float) -> str:
        """Partitions (or steps), documents and bytes with their rates (over the last
        `WINDOW` seconds while running, over the whole phase once done), an ETA while
        running, the time so far."""
        seconds = now - self.started
        work, finished = self.work, done >= total
        parts = [f"{phase}: {done}/{total}"]
        if work is not None and work.note:
            parts.append(work.note)
        if work is None or not (work.docs or work.nbytes):
            return " · ".join([*parts, f"{seconds:.1f}s"])
        t0, docs0, bytes0, f0 = self.samples[0] if self.samples and not finished else (
            self.started, 0, 0, 0.0
        )  # fmt: skip
        span = max(now - t0, 1e-9)
        docs, size = _count(work.docs), _size(work.nbytes)
        if not finished and work.docs_total:
            docs += f"/{_count(work.docs_total)}"
        if not finished and work.bytes_total:
            size += f"/{_size(work.bytes_total)}"
        parts += [f"{docs} docs ({_count((work.docs - docs0) / span)}/s)",
                  f"{size} ({_size((work.nbytes - bytes0) / span)}/s)"]  # fmt: skip
        fraction = work.fraction()
        if not finished and fraction is not None and f0 is not None and fraction > f0:
            parts.append(f"ETA {_clock((1 - fraction) * span / (fraction - f0))}")
        return " · ".join([*parts, f"{seconds:.1f}s"])


class _Renderer:
    """What both displays share: a plain progress call and one with the work done inside
    the phase (`Detailed`) are the same update, with or without the work."""

    def __call__(self, phase: str, done: int, total: int) -> None:
        self._update(phase, done, total, None)

    def work(self, phase: str, done: int, total: int, work: Work) -> None:
        self._update(phase, done, total, work)

    def _update(self, phase: str, done: int, total: int, work: Work | None) -> None:
        raise NotImplementedError


class StderrProgress(_Renderer):
    """The CLI's renderer. On a terminal the current phase is redrawn in place, at most once
    every `every` seconds (a phase's completion is always drawn); otherwise (CI logs, pipes)
    one line is written when a phase completes. Safe to call from several threads."""

    def __init__(
        self, stream: TextIO | None = None, every: float | None = None, tty: bool | None = None
    ) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.every = interval() if every is None else every
        self.phases: dict[str, _Phase] = {}
        self.drawn_at = float("-inf")
        self.current = ""
        self.lock = threading.Lock()

    def _update(self, phase: str, done: int, total: int, work: Work | None) -> None:
        with self.lock:
            now = time.perf_counter()
            state = self.phases.get(phase)
            if state is None or (state.finished and done < total):  # new, or a new run's
                state = self.phases[phase] = _Phase(now)
            if work is not None:
                state.work = work
                state.sample(now)
            finished = done >= total
            if state.finished:
                return  # drawn complete already: a late poll changes nothing
            if not finished and phase == self.current and now - self.drawn_at < self.every:
                return
            state.finished = finished
            line = state.line(phase, done, total, now)
            if self.tty:
                width = shutil.get_terminal_size().columns - 1
                end = "\n" if finished else ""
                self.stream.write(f"\r\033[K{line[:width] if width > 20 else line}{end}")
            elif finished:
                self.stream.write(line + "\n")
            else:
                return
            self.stream.flush()
            self.drawn_at, self.current = now, "" if finished else phase


class TqdmProgress(_Renderer):
    """One tqdm bar per phase, counting documents when their total is known, else input
    bytes, else partitions (or a decision's steps). `tqdm.auto` draws a widget in a notebook
    (with ipywidgets: `pip install curate[notebook]`) and text elsewhere."""

    def __init__(self, bar: Any = None, every: float | None = None, **options: Any) -> None:
        if bar is None:
            from tqdm.auto import tqdm

            bar = tqdm
        self.bar_class = bar
        self.options = options
        self.every = interval() if every is None else every
        self.bars: dict[str, Any] = {}
        self.units: dict[str, str] = {}
        self.drawn_at: dict[str, float] = {}
        self.lock = threading.Lock()

    def _update(self, phase: str, done: int, total: int, work: Work | None) -> None:
        with self.lock:
            finished = done >= total
            unit, count, of = "step" if work is not None and work.note else "part", done, total
            if work is not None and work.docs_total:
                unit, count, of = "docs", work.docs, work.docs_total
            elif work is not None and work.bytes_total:
                unit, count, of = "B", work.nbytes, work.bytes_total
            bar = self.bars.get(phase)
            if bar is None or self.units[phase] != unit:  # a pass: partitions, then its work
                if bar is not None:  # what it counted is known now: a bar counting that
                    bar.leave = False
                    bar.close()
                bar = self.bars[phase] = self.bar_class(
                    total=of, desc=phase, unit=unit, unit_scale=unit in ("docs", "B"),
                    leave=True, **self.options,
                )  # fmt: skip
                self.units[phase] = unit
            now = time.perf_counter()
            if not finished and now - self.drawn_at.get(phase, float("-inf")) < self.every:
                return
            self.drawn_at[phase] = now
            if finished:
                count = of if unit != "B" else max(count, of)
            elif unit == "B":  # Arrow bytes against a file's (csv, json): near, not exact
                count = min(count, of - 1)
            bar.total = max(of, count)
            note = [f"{done}/{total}"] if unit not in ("part", "step") else []
            if work is not None and work.note:
                note.append(work.note)
            elif work is not None and unit != "docs" and work.docs:
                note.append(f"{_count(work.docs)} docs")
            bar.set_postfix_str(" · ".join(note), refresh=False)
            bar.update(count - bar.n)
            if finished:
                bar.close()
                del self.bars[phase], self.units[phase]


def in_notebook() -> bool:
    """A Jupyter kernel runs this process (as `tqdm.autonotebook` tells it)."""
    shell = sys.modules.get("IPython")
    if "ipykernel.zmqshell" not in sys.modules or shell is None:
        return False
    ipython = shell.get_ipython()
    return ipython is not None and "IPKernelApp" in getattr(ipython, "config", {})


def auto() -> ProgressFn:
    """What `curate.run` reports to when given nothing: bars in a notebook, else nothing."""
    return TqdmProgress() if in_notebook() else no_progress

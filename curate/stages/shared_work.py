"""A stage's work on each document, which an engine may share with workers that are idle.

A stage whose work on one document depends on that document and the stage's configuration
alone defines `help_with(item)` and goes through its documents with `each(self, items,
self.help_with)`. Where nothing is installed (one worker, Ray, the driver) that is a loop;
the local engine installs its help desk in each worker (`curate.engines.help_desk`), which
may hand some of the items to another worker's `help_with` of the same stage, set up with
the same configuration: so the results must not depend on which process computed them.
Kept apart from the engines, so a stage's code hash does not cover engine code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

Share = Callable[[Any, Sequence[Any], Callable[[Any], Any], Callable[[Any], int] | None], list[Any]]
_SHARE: Share | None = None


def install(share: Share | None) -> None:
    """Set (or with None, remove) how this process shares stages' items."""
    global _SHARE
    _SHARE = share


def each(
    stage: Any,
    items: Sequence[T],
    work: Callable[[T], R],
    size: Callable[[T], int] | None = None,
) -> list[R]:
    """`work(item)` for every item (`work` is `stage.help_with`), in the items' order. With
    `size`, what is shared goes largest first, so what is left at the end is small."""
    share = _SHARE
    if share is None or len(items) < 2:
        return [work(item) for item in items]
    return share(stage, items, work, size)


def runs(sizes: Iterable[float], most: float) -> list[tuple[int, int]]:
    """Consecutive items in runs (start, stop) of about `most` in total size, an item of
    that size or more being a run of its own: how a stage whose items are too small to
    share one by one (a document's tokens) cuts a batch into items worth handing over."""
    out: list[tuple[int, int]] = []
    start = stop = 0
    total = 0.0
    for stop, size in enumerate(sizes, 1):
        total += size
        if total >= most:
            out.append((start, stop))
            start, total = stop, 0.0
    if start < stop:
        out.append((start, stop))
    return out


def sharing() -> bool:
    """Whether an engine shares items in this process: `each` is more than a loop (a stage
    may then cut its work into items it would otherwise do in one call)."""
    return _SHARE is not None


def helps(stage: Any) -> bool:
    """Whether the stage's documents may be shared (it defines `help_with`)."""
    return callable(getattr(stage, "help_with", None))

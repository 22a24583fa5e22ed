"""Running piece functions as Ray tasks.

Every function run here is pure, so Ray may run any of them twice (a worker died) safely.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import ray

from curate.engines.ray.placement import note

CREATED = {"tasks": 0, "objects": 0}
"""Tasks and objects this process has created, for the driver-memory benchmark to relate
what the driver holds to how many objects it owns."""


@ray.remote
def _run(
    fn: Callable[..., list[Any]],
    args: tuple[Any, ...],
    outputs: int,
    markers: Path | None,
    *parts: Any,
) -> Any:
    note(markers, "decide")
    result = fn(list(parts), *args)
    if len(result) != outputs:
        raise ValueError(f"{fn.__name__} returned {len(result)} pieces, not {outputs}")
    return result[0] if outputs == 1 else tuple(result)


def call(
    fn: Callable[..., list[Any]],
    args: tuple[Any, ...],
    parts: Sequence[Any] = (),
    outputs: int = 1,
    markers: Path | None = None,
    spread: bool = False,
) -> list[ray.ObjectRef]:
    """Run `fn(parts, *args)` as a Ray task; its list of `outputs` pieces, as references.

    Parts that are object references arrive as their values; others (`Files`) as they are.
    With `markers`, the task leaves a marker of the node it ran on there (`placement`).
    `spread`: place the task by Ray's SPREAD strategy rather than near its inputs, for
    tasks that read and write the shared filesystem (a shuffle's), whose inputs live
    nowhere in particular: by default Ray packs short tasks onto the driver's node, reusing
    one worker for task after task, and the other nodes' CPUs and memory sit idle.
    """
    strategy = "SPREAD" if spread else "DEFAULT"
    refs = _run.options(num_returns=outputs, scheduling_strategy=strategy).remote(
        fn, args, outputs, markers, *parts
    )
    CREATED["tasks"] += 1
    CREATED["objects"] += outputs
    return [refs] if outputs == 1 else list(refs)

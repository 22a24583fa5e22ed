"""Running piece functions as Ray tasks.

Every function run here is pure, so Ray may run any of them twice (a worker died) safely.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import ray

CREATED = {"tasks": 0, "objects": 0}
"""Tasks and objects this process has created, for the driver-memory benchmark to relate
what the driver holds to how many objects it owns."""


@ray.remote
def _run(fn: Callable[..., list[Any]], args: tuple[Any, ...], outputs: int, *parts: Any) -> Any:
    result = fn(list(parts), *args)
    if len(result) != outputs:
        raise ValueError(f"{fn.__name__} returned {len(result)} pieces, not {outputs}")
    return result[0] if outputs == 1 else tuple(result)


def call(
    fn: Callable[..., list[Any]], args: tuple[Any, ...], parts: Sequence[Any] = (), outputs: int = 1
) -> list[ray.ObjectRef]:
    """Run `fn(parts, *args)` as a Ray task; its list of `outputs` pieces, as references.

    Parts that are object references arrive as their values; others (`Files`) as they are.
    """
    refs = _run.options(num_returns=outputs).remote(fn, args, outputs, *parts)
    CREATED["tasks"] += 1
    CREATED["objects"] += outputs
    return [refs] if outputs == 1 else list(refs)

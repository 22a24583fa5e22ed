"""Let Ray Data's driver threads finish before `ray.shutdown()`, so a run exits 0.

A Ray Data execution runs on driver threads of its own: the streaming executor's
scheduling loop (`StreamingExecutor-<id>`), its metadata prefetcher
(`ray-data-metadata-prefetch`) and the iterator's prefetch workers (`iter_threaded`).
When the last row is consumed, Ray Data shuts the execution down but waits for those
threads only 2 s and 5 s, then leaves them running. On a loaded machine (CI, or `strace
-f` in tests/engines/test_ray_network.py) a thread can still be inside a Ray call when the
engine calls `ray.shutdown()`; Ray then ends the whole process with exit code 1 ("The core
worker has already been shutdown ... The process will exit") after the version was
published. `settle` joins those threads first; they end on their own once the execution
is shut down, so the wait is short whenever nothing is stuck.
"""

from __future__ import annotations

import logging
import threading
import time

log = logging.getLogger(__name__)

RAY_DATA_THREADS = ("StreamingExecutor-", "ray-data-metadata-prefetch", "iter_threaded")
"""Name prefixes of the driver threads a Ray Data execution starts and stops."""


def ray_data_threads() -> list[threading.Thread]:
    """Ray Data's execution threads still alive in this process."""
    return [
        thread
        for thread in threading.enumerate()
        if thread is not threading.current_thread() and thread.name.startswith(RAY_DATA_THREADS)
    ]


def settle(timeout: float = 60.0) -> list[threading.Thread]:
    """Join Ray Data's execution threads, at most `timeout` seconds in all; the ones left."""
    deadline = time.monotonic() + timeout
    for thread in ray_data_threads():
        thread.join(max(0.0, deadline - time.monotonic()))
    left = [thread for thread in ray_data_threads() if thread.is_alive()]
    if left:
        names = ", ".join(sorted(thread.name for thread in left))
        log.warning("Ray Data threads still running after %.0f s: %s", timeout, names)
    return left

"""The Ray engine joins Ray Data's driver threads before `ray.shutdown()` (curate.engines.ray.settle).

A Ray Data thread still inside a Ray call at shutdown makes Ray end the process with exit
code 1 after the version was published (seen once in CI under `strace -f`). The race needs
a loaded machine to show; these tests pin the part curate owns: which threads are waited
for, that a slow one is waited for, and that a stuck one is named and does not hang the run.
"""

from __future__ import annotations

import logging
import threading
import time

import pytest

pytest.importorskip("ray", reason="Ray is not installed: pip install 'curate[ray]'")

from curate.engines.ray.settle import ray_data_threads, settle


def _thread(name: str, target) -> threading.Thread:
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread


def test_a_slow_ray_data_thread_is_waited_for() -> None:
    slow = _thread("ray-data-metadata-prefetch", lambda: time.sleep(1.0))
    started = time.monotonic()
    assert settle(timeout=30) == []
    assert not slow.is_alive()
    assert time.monotonic() - started >= 0.5


def test_only_ray_data_threads_are_waited_for() -> None:
    stop = threading.Event()
    other = _thread("data-usage-metrics-poller", stop.wait)  # Ray Data's, but never ends
    mine = _thread("StreamingExecutor-dataset_1", stop.wait)
    try:
        assert ray_data_threads() == [mine]
    finally:
        stop.set()
        other.join()
        mine.join()


def test_a_stuck_thread_is_named_and_left(caplog: pytest.LogCaptureFixture) -> None:
    stop = threading.Event()
    stuck = _thread("iter_threaded", stop.wait)
    try:
        with caplog.at_level(logging.WARNING, logger="curate.engines.ray.settle"):
            assert settle(timeout=0.2) == [stuck]
        assert "iter_threaded" in caplog.text
    finally:
        stop.set()
        stuck.join()

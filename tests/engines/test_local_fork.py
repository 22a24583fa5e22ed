"""The local engine's forked workers: what they inherit from the driver, and how.

Each check runs in a fresh interpreter: the pytest process may already run threads or have
imported polars, and then the engine starts its workers from a forkserver instead.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

PROBE = textwrap.dedent(
    """
    import gc, json, sys
    from curate.engines.local import LocalEngine

    held = [[i] for i in range(10_000)]  # the driver's own objects, as a plan or a model
    if sys.argv[1] == "user-froze":
        gc.freeze()
    before = gc.get_freeze_count()
    engine = LocalEngine(2)
    engine.start()
    try:
        assert engine.forks() is False  # started: the pool exists
        workers = [engine._pool.submit(gc.get_freeze_count).result() for _ in range(4)]
        after = gc.get_freeze_count()
    finally:
        engine.close()
    print(json.dumps({"before": before, "after": after, "workers": workers}))
    """
)


def probe(case: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, case], capture_output=True, text=True, check=True
    )
    result: dict[str, object] = json.loads(out.stdout.splitlines()[-1])
    return result


def test_forked_workers_keep_what_they_inherit_frozen_and_the_driver_does_not() -> None:
    """A worker's collector never scans the objects it inherited (`gc.freeze()` before the
    fork); the driver's objects are back in its collector's reach once the workers are forked."""
    got = probe("plain")
    assert got["before"] == 0
    assert got["after"] == 0
    workers = got["workers"]
    assert isinstance(workers, list) and len(workers) == 4
    assert all(count > 10_000 for count in workers)  # the driver's list among them


def test_a_driver_that_froze_objects_of_its_own_keeps_them_frozen() -> None:
    """Unfreezing after the fork would unfreeze what the caller froze: the engine then
    leaves the collector as it found it."""
    got = probe("user-froze")
    assert isinstance(got["before"], int) and got["before"] > 10_000
    assert isinstance(got["after"], int) and got["after"] > 10_000  # still frozen: not unfrozen

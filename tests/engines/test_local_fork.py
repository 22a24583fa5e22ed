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
    if sys.argv[1] == "threaded":  # a thread runs: the engine starts a forkserver instead
        import threading
        stop = threading.Event()
        threading.Thread(target=stop.wait, daemon=True).start()
    before = gc.get_freeze_count()
    engine = LocalEngine(2)
    engine.start()
    try:
        assert engine.forks() is False  # started: the pool exists
        method = engine._pool._mp_context.get_start_method()
        workers = [engine._pool.submit(gc.get_freeze_count).result() for _ in range(4)]
        after = gc.get_freeze_count()
    finally:
        engine.close()
    print(json.dumps({"before": before, "after": after, "workers": workers, "method": method}))
    """
)


def probe(case: str, script: str = PROBE) -> dict[str, object]:
    """What `script` printed last (JSON), run in a fresh interpreter with `case`."""
    out = subprocess.run(
        [sys.executable, "-c", script, case], capture_output=True, text=True, check=True
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


def test_workers_started_from_a_forkserver_freeze_what_they_hold_as_they_start() -> None:
    """They inherit nothing from the driver, so nothing frozen: each freezes its own modules
    as it starts (`tasks.freeze_setups`), and each stage's setup once built."""
    got = probe("threaded")
    assert got["method"] == "forkserver"
    assert got["after"] == 0
    workers = got["workers"]
    assert isinstance(workers, list) and len(workers) == 4
    assert all(count > 10_000 for count in workers)  # pyarrow's and curate's modules


SETUP = textwrap.dedent(
    """
    import gc, json, sys
    from curate.engines import tasks
    from curate.stages.base import StageContext
    from curate.stages.pii import Pii, PiiParams

    if sys.argv[1] == "worker":
        tasks.freeze_setups()
    before = gc.get_freeze_count()
    stage = tasks.ready(Pii(PiiParams(), StageContext()))
    after = gc.get_freeze_count()
    again = tasks.ready(Pii(PiiParams(), StageContext()))
    print(json.dumps({"before": before, "after": after, "same": again is stage,
                      "again": gc.get_freeze_count()}))
    """
)


def test_a_worker_freezes_each_stage_setup_it_builds_and_the_driver_does_not() -> None:
    """Presidio's recognizers, built in a worker, are out of its collector's reach from then
    on; in the driver (a notebook's process) the same setup leaves the collector alone."""
    worker = probe("worker", SETUP)
    assert isinstance(worker["before"], int) and isinstance(worker["after"], int)
    assert worker["after"] > worker["before"] + 10_000
    assert worker["same"] is True and worker["again"] == worker["after"]  # set up once
    driver = probe("driver", SETUP)
    assert driver["before"] == 0 and driver["after"] == 0

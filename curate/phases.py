"""Phase markers for crash tests: where a run was when it was killed.

When `CURATE_PHASE_LOG` names a file, each phase a run enters (reading, map, shard_write, decide,
checkpoint, barrier, publish) is appended to it with the process id. When `CURATE_KILL_AT` is
`phase:n`, the n-th time any process of the run enters that phase, the whole process
group is killed with SIGKILL: a power cut at a chosen moment. When `CURATE_PAUSE_AT` is
`phase:n`, the process that enters it the n-th time creates `<log>.paused` and waits
until the test removes it: a moment to change an input under a running build. All cost
one dictionary lookup when unset, which is always outside tests.
"""

from __future__ import annotations

import os
import signal
import time

_LOG = os.environ.get("CURATE_PHASE_LOG")
_KILL = os.environ.get("CURATE_KILL_AT")
_PAUSE = os.environ.get("CURATE_PAUSE_AT")
_PAUSE_SECONDS = 120


def mark(phase: str) -> None:
    if _LOG is None:
        return
    fd = os.open(_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{phase} {os.getpid()}\n".encode())
    finally:
        os.close(fd)
    if _KILL is not None and _reached(_KILL, phase, _LOG):
        os.killpg(os.getpgid(0), signal.SIGKILL)
    if _PAUSE is not None and _reached(_PAUSE, phase, _LOG, exactly=True):
        paused = f"{_LOG}.paused"
        with open(paused, "w", encoding="utf-8") as f:
            f.write(f"{phase} {os.getpid()}\n")
        deadline = time.monotonic() + _PAUSE_SECONDS
        while os.path.exists(paused) and time.monotonic() < deadline:
            time.sleep(0.01)


def _reached(spec: str, phase: str, log: str, exactly: bool = False) -> bool:
    want, _, nth = spec.partition(":")
    if want != phase:
        return False
    with open(log, encoding="utf-8") as f:
        seen = sum(1 for line in f if line.split(" ", 1)[0] == phase)
    return seen == int(nth or 1) if exactly else seen >= int(nth or 1)

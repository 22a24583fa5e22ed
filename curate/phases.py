"""Phase markers for crash tests: where a run was when it was killed.

When `CURATE_PHASE_LOG` names a file, each phase a run enters (reading, map, shard_write,
barrier, publish) is appended to it with the process id. When `CURATE_KILL_AT` is
`phase:n`, the n-th time any process of the run enters that phase, the whole process
group is killed with SIGKILL: a power cut at a chosen moment. Both cost one dictionary
lookup when unset, which is always outside tests.
"""

from __future__ import annotations

import os
import signal

_LOG = os.environ.get("CURATE_PHASE_LOG")
_KILL = os.environ.get("CURATE_KILL_AT")


def mark(phase: str) -> None:
    if _LOG is None:
        return
    fd = os.open(_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{phase} {os.getpid()}\n".encode())
    finally:
        os.close(fd)
    if _KILL is not None:
        want, _, nth = _KILL.partition(":")
        if want == phase:
            with open(_LOG, encoding="utf-8") as f:
                seen = sum(1 for line in f if line.split(" ", 1)[0] == phase)
            if seen >= int(nth or 1):
                os.killpg(os.getpgid(0), signal.SIGKILL)

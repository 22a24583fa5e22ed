"""Run one command and account for the CPU time of every process it ever started.

``wait4`` on a child reports only the descendants that were reaped inside the tree.
datatrove's executor starts its pool from a multiprocessing forkserver that outlives
the main process and is never waited for, so its workers' CPU would vanish from
the count. This wrapper makes itself a child subreaper (``PR_SET_CHILD_SUBREAPER``):
orphans are re-parented to it, it reaps every one, and ``RUSAGE_CHILDREN`` then
holds the whole tree's user and system time. Wall time runs from the start of the
command until the last descendant has exited.

Usage: python -m benchmarks.reaper RESULT_JSON -- COMMAND...
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def main() -> None:
    result_path, separator, *command = sys.argv[1:]
    if separator != "--" or not command:
        raise SystemExit(__doc__)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")
    start = time.perf_counter()
    child = subprocess.Popen(command)
    returncode = None
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if pid == child.pid:
            returncode = os.waitstatus_to_exitcode(status)
            child.returncode = returncode
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(result_path, "w") as handle:
        json.dump(
            {
                "wall_s": wall,
                "user_s": usage.ru_utime,
                "sys_s": usage.ru_stime,
                "returncode": returncode,
            },
            handle,
        )
    sys.exit(returncode or 0)


if __name__ == "__main__":
    main()

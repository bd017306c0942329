"""Child processes that die with their parent.

A `dagster-daemon` started for a backfill must not outlive the command that started it: killed
(SIGKILL, a closed terminal) that command runs no cleanup, and an orphan daemon would go on
launching automation runs on inputs nobody looks after. Linux delivers a signal to a child when
its parent dies if the child asks (prctl PR_SET_PDEATHSIG); elsewhere only the normal stop applies.
That signal reaches one process, not what it started (a daemon's code server and run workers
would linger until their own heartbeats time out), so the child is a small supervisor leading its
own process group: on SIGTERM it stops the whole group. `python -m` this module runs one.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: signal.Signals = signal.SIGTERM) -> Callable[[], None]:
    """A `preexec_fn` for `subprocess.Popen`: the child gets `sig` when this process dies, and
    stops on SIGTERM and SIGINT."""
    parent = os.getpid()

    def arm() -> None:
        # Inherited as ignored (a command started in the background), SIGINT would leave Dagster's
        # processes deaf to SIGTERM too: they map SIGTERM onto SIGINT's handler.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if not sys.platform.startswith("linux"):
            return
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(sig))
        if os.getppid() != parent:  # the parent died before the request was in place
            os.kill(os.getpid(), sig)

    return arm


def group_alive(pgid: int) -> bool:
    """Whether any process of process group `pgid` still runs."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def supervise(argv: list[str]) -> int:
    """Run `argv` in this process's group; SIGTERM or SIGINT stops the whole group."""
    child = subprocess.Popen(argv)

    def stop(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the group signal below reaches us too
        os.killpg(os.getpgrp(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return child.wait()


if __name__ == "__main__":
    sys.exit(supervise(sys.argv[1:]))

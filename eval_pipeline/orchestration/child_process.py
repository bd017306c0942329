"""Child processes that die with their parent.

A `dagster-daemon` started for a backfill must not outlive the command that started it: killed
(SIGKILL, a closed terminal) that command runs no cleanup, and an orphan daemon would go on
launching automation runs on inputs nobody looks after. Linux delivers a signal to a child when
its parent dies if the child asks (prctl PR_SET_PDEATHSIG); elsewhere only the normal stop applies.
That signal reaches one process, not what it started (a daemon's code server and run workers
would linger until their own heartbeats time out), so the child is a small supervisor leading its
own process group: on SIGTERM it stops the whole group. SUPERVISOR runs one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1
STOP_GRACE_S = 10.0
# The supervisor's command, followed by what it supervises: this file run on the standard library
# alone (it imports nothing else), without site-packages or the user's environment, starts on
# about two thirds of the CPU of `python -m` this module.
SUPERVISOR = [sys.executable, "-I", "-S", __file__]


def die_with_parent(sig: signal.Signals = signal.SIGTERM) -> Callable[[], None]:
    """A `preexec_fn` for `subprocess.Popen`: the child gets `sig` when this process dies, and
    stops on SIGTERM and SIGINT."""
    # Here, not at the top: the supervisor (this module run) needs no ctypes; nor in `arm`, which
    # runs in the child between fork and exec.
    import ctypes
    import ctypes.util

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


def supervise(argv: list[str], grace_s: float = STOP_GRACE_S) -> int:
    """Run `argv` in this process's group. SIGTERM or SIGINT stops the whole group: SIGTERM
    first, then, `grace_s` later (a daemon thread busy with a slow call, a code server waiting
    for its heartbeat to lapse), SIGKILL to whatever is left, this supervisor included."""
    stopping: list[bool] = []

    def stop(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the group signal below reaches us too
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        stopping.append(True)
        signal.signal(signal.SIGALRM, lambda *_: os.killpg(os.getpgrp(), signal.SIGKILL))
        signal.setitimer(signal.ITIMER_REAL, grace_s)
        os.killpg(os.getpgrp(), signal.SIGTERM)

    # Before the child starts: a stop that came while it started (the parent may die at any
    # moment) would otherwise end this supervisor alone and leave the child running on its own.
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    child = subprocess.Popen(argv)
    if stopping:  # the stop came before the child was there to receive it
        child.terminate()
    # Blocked until the child ends (signal handlers still run): a stop ends the group as soon as
    # the child is gone, not at the next look.
    code = child.wait()
    if stopping:  # the daemon is gone: nothing it started may outlive it
        os.killpg(os.getpgrp(), signal.SIGKILL)
    return code


if __name__ == "__main__":
    sys.exit(supervise(sys.argv[1:]))

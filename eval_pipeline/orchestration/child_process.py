"""Child processes that die with their parent.

A `dagster-daemon` started for a backfill must not outlive the command that started it: killed
(SIGKILL, a closed terminal) that command runs no cleanup, and an orphan daemon would go on
launching automation runs on inputs nobody looks after. Linux delivers a signal to a child when
its parent dies if the child asks (prctl PR_SET_PDEATHSIG); elsewhere only the normal stop applies.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
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

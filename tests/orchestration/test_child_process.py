"""The supervisor a backfill's daemon runs under: whenever its parent's stop arrives, even while
it is still starting what it supervises, nothing it started outlives it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from eval_pipeline.orchestration.child_process import STOP_GRACE_S, group_alive

# A child that would run far longer than the test waits, unless it is stopped.
LINGERING = [sys.executable, "-c", "import time; time.sleep(300)"]


def test_a_stop_at_any_moment_of_the_start_leaves_nothing_running() -> None:
    # The parent may die (and its death signal arrive) at any moment: while the supervisor's
    # interpreter starts, while it starts its child, or after. Swept across that start-up: a
    # stop that fell between starting the child and handling the signal once left the child
    # running on its own, an orphan outside anyone's care.
    command = [sys.executable, "-m", "eval_pipeline.orchestration.child_process", *LINGERING]
    for delay_ms in range(20, 200, 1):
        supervisor = subprocess.Popen(command, start_new_session=True)
        time.sleep(delay_ms / 1000)
        supervisor.send_signal(signal.SIGTERM)
        supervisor.wait(timeout=60)
        deadline = time.monotonic() + STOP_GRACE_S + 5
        while group_alive(supervisor.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        alive = group_alive(supervisor.pid)
        if alive:
            os.killpg(supervisor.pid, signal.SIGKILL)
        assert not alive, f"a stop {delay_ms} ms into the start left the supervised child running"

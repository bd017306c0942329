"""The supervisor a backfill's daemon runs under: whenever its parent's stop arrives, even while
it is still starting what it supervises, nothing it started outlives it."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from eval_pipeline.orchestration.child_process import STOP_GRACE_S, SUPERVISOR, group_alive

# A child that would run far longer than the test waits, unless it is stopped. Any program does:
# what is swept is the supervisor's start-up, and a lighter child leaves more of the CPU to it.
LINGERING = ["sleep", "300"]


def _wait(process: subprocess.Popen[str], timeout_s: float) -> int:
    """`process`'s exit status, woken when it ends (a pidfd) rather than looking every few ms.
    Still running after `timeout_s`: a failure naming its state and its signal masks (a rare hang
    seen twice in ~14 runs of the sweep, not reproduced outside the suite)."""
    fd = os.pidfd_open(process.pid)
    try:
        select.select([fd], [], [], timeout_s)
    finally:
        os.close(fd)
    try:
        return process.wait(timeout=0)
    except subprocess.TimeoutExpired:
        status = Path(f"/proc/{process.pid}/status").read_text().splitlines()
        state = [line for line in status if line.startswith(("State", "Sig", "Shd"))]
        group = subprocess.run(
            ["ps", "-o", "pid,stat,wchan:20,args", "-g", str(process.pid)], capture_output=True, text=True
        ).stdout
        raise AssertionError(f"still running {timeout_s} s after the stop: {state}\n{group}") from None


def _group_ended(pgid: int, timeout_s: float) -> bool:
    """Whether process group `pgid` is gone within `timeout_s` (its last members are reaped by
    whoever adopted them, which nothing here can wait for: looked at every 5 ms)."""
    deadline = time.monotonic() + timeout_s
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.005)
    alive = group_alive(pgid)
    if alive:
        os.killpg(pgid, signal.SIGKILL)
    return not alive


def test_a_stop_at_any_moment_of_the_start_leaves_nothing_running() -> None:
    # The parent may die (and its death signal arrive) at any moment: while the supervisor's
    # interpreter starts, while it starts its child, or after. Swept across that start-up, 1 ms
    # apart: a stop that fell between starting the child and handling the signal once left the
    # child running on its own, an orphan outside anyone's care. Two supervisors at a time, each
    # stopped at its own moment of its own start (a stop's moment counts from its spawn).
    delays_ms = list(range(20, 200, 1))
    for pair in zip(delays_ms[::2], delays_ms[1::2], strict=True):
        supervisors = []
        for delay_ms in pair:
            supervisor = subprocess.Popen([*SUPERVISOR, *LINGERING], start_new_session=True, text=True)
            supervisors.append((supervisor, time.monotonic() + delay_ms / 1000, delay_ms))
        for supervisor, stop_at, _ in supervisors:
            time.sleep(max(0.0, stop_at - time.monotonic()))
            supervisor.send_signal(signal.SIGTERM)
        for supervisor, _, delay_ms in supervisors:
            # Stopped (SIGTERM before its handler was in place, else SIGKILL once the group is
            # stopped), never exited on its own: a supervisor that could not start fails here.
            assert _wait(supervisor, 60) in (-signal.SIGTERM, -signal.SIGKILL), delay_ms
            assert _group_ended(supervisor.pid, STOP_GRACE_S + 5), (
                f"a stop {delay_ms} ms into the start left the supervised child running"
            )


def test_a_child_deaf_to_the_stop_is_killed_after_the_grace() -> None:
    # The child ignores SIGTERM (a daemon thread stuck in a slow call): the supervisor, stopped,
    # ends it and itself with SIGKILL once the grace is over.
    grace_s = 0.5
    deaf = ["sh", "-c", "trap '' TERM; echo ready; exec sleep 300"]
    code = f"from eval_pipeline.orchestration.child_process import supervise; supervise({deaf!r}, {grace_s})"
    supervisor = subprocess.Popen(
        [sys.executable, "-c", code], start_new_session=True, text=True, stdout=subprocess.PIPE
    )
    assert supervisor.stdout is not None
    assert supervisor.stdout.readline() == "ready\n"
    supervisor.send_signal(signal.SIGTERM)
    assert _wait(supervisor, 60) == -signal.SIGKILL
    assert _group_ended(supervisor.pid, 5), "the child deaf to SIGTERM outlived the supervisor"

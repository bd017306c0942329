"""The Dagster daemon a command relies on: whether one is alive, and one of the command's own.

A daemon writes a heartbeat every 30 s, and Dagster counts it alive until its last heartbeat is
30 minutes old, so a daemon that was killed looks alive for half an hour. The daemons eval-pipeline
starts are recorded in the instance (the host, the process group and when it started): while that
group runs the daemon is alive, and once it is gone, every heartbeat written since it started is a
dead daemon's, whatever its age. A daemon started by anyone else (`dg dev`) cannot be told by
its process: it counts as alive while its last heartbeat is younger than `FRESH_S`, three
heartbeats.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import dagster as dg
from filelock import FileLock

from eval_pipeline.orchestration.child_process import SUPERVISOR, die_with_parent, group_alive
from eval_pipeline.runtime.dagster_private import IN_PROGRESS_RUN_STATUSES

RECORD_KEY = "eval_pipeline/daemon"  # in the instance's key-value store
LOCK_FILE = "daemon.lock"
FRESH_S = 90.0
DAEMON_STOP_GRACE_S = 20.0
RUNS_GRACE_S = 180.0  # for runs the daemon's automation launched meanwhile


def _record(instance: dg.DagsterInstance) -> dict[str, object] | None:
    found = instance.run_storage.get_cursor_values({RECORD_KEY}).get(RECORD_KEY)
    return json.loads(found) if found else None


def _last_heartbeat(instance: dg.DagsterInstance) -> float | None:
    """When the daemon that runs backfills last said it was alive (seconds since the epoch)."""
    heartbeat = instance.get_daemon_heartbeats().get("BACKFILL")
    return None if heartbeat is None else heartbeat.timestamp


def daemon_alive(instance: dg.DagsterInstance) -> bool:
    """Whether a daemon serving this instance's backfills runs now (see the module docstring)."""
    record = _record(instance)
    ours = record if record is not None and record["host"] == socket.gethostname() else None
    if ours is not None and group_alive(int(str(ours["pgid"]))):
        return True  # also before its first heartbeat: a second daemon must not start meanwhile
    last = _last_heartbeat(instance)
    if last is None:
        return False
    if ours is not None and last >= float(str(ours["since"])):
        return False  # the heartbeat of the daemon we started, which is gone
    return time.time() - last < FRESH_S


@contextmanager
def own_daemon(instance: dg.DagsterInstance, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A `dagster-daemon` for this project while the block runs, recorded in the instance. It
    loads this code location from the working directory, as `dg dev` would."""
    command = [
        *SUPERVISOR,
        str(Path(sys.executable).with_name("dagster-daemon")),
        "run",
        "-m",
        "eval_pipeline.definitions",
    ]
    log.parent.mkdir(parents=True, exist_ok=True)
    since = time.time()
    with log.open("ab") as out:
        process = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            # A supervisor leading its own group: stopped, it stops the daemon and every run it
            # launched, also when this process is killed (die_with_parent).
            start_new_session=True,
            preexec_fn=die_with_parent(),
            env={**os.environ, "DAGSTER_HOME": instance.root_directory},
        )
        try:
            record = {"host": socket.gethostname(), "pgid": process.pid, "since": since}
            instance.run_storage.set_cursor_values({RECORD_KEY: json.dumps(record)})
            yield process
        finally:
            _wait_for_runs(instance, time.monotonic() + RUNS_GRACE_S)
            _stop(process)


class DaemonKeeper:
    """Sees that a daemon serves the instance while a command needs one: it relies on a live one
    and starts its own (kept until `stack` closes) when there is none, or when the one it relied
    on dies. Two commands asking at once start one daemon, not two (a file lock)."""

    def __init__(self, instance: dg.DagsterInstance, log: Path, stack: ExitStack) -> None:
        self._instance = instance
        self._log = log
        self._stack = stack
        self.started: subprocess.Popen[bytes] | None = None

    def ensure(self) -> bool:
        """Whether this call started the command's own daemon."""
        if self.started is not None or daemon_alive(self._instance):
            return False
        with FileLock(Path(self._instance.root_directory) / LOCK_FILE):
            if daemon_alive(self._instance):  # another command started one meanwhile
                return False
            self.started = self._stack.enter_context(own_daemon(self._instance, self._log))
        return True


def _wait_for_runs(instance: dg.DagsterInstance, deadline: float) -> None:
    """Let runs the daemon launched meanwhile (e.g. the automation on today) finish first."""
    in_progress = dg.RunsFilter(statuses=[*IN_PROGRESS_RUN_STATUSES])
    while instance.get_runs_count(in_progress) and time.monotonic() < deadline:
        time.sleep(1.0)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=DAEMON_STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

"""`eval-pipeline` commands run one after another in one process, each when the test asks.

Run as a script, this module reads a line on stdin (JSON: `cwd`, `env`, `argv`, `fork`), runs that
command in that folder with that environment, prints its output, then EXIT_LINE and JSON of its
exit code and what it wrote to stderr; and so on until stdin closes. The first command is what a
fresh process runs (nothing of Dagster or the project is imported before it); later ones do without
a fresh interpreter's imports. A forked command runs in a child of this process (FORKED_LINE gives
its pid), its output discarded: a process of its own that a test may kill, without the imports
this process has already made. `Rounds` is the test's side.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

from eval_pipeline.cli import main

EXIT_LINE = "cli_rounds: exit "
FORKED_LINE = "cli_rounds: forked "


class Ended(NamedTuple):
    code: int | None  # None: the process ended, or the command did not end in time
    out: str
    err: str


class Rounds:
    """A process running this module's commands, its lines read as they come (its output can
    never fill the pipe and stall it)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__],
            env=env,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def start(self, cwd: Path, env: dict[str, str], argv: list[str], fork: bool = False) -> None:
        assert self.process.stdin is not None
        command = {"cwd": str(cwd), "env": env, "argv": argv, "fork": fork}
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def fork(self, cwd: Path, env: dict[str, str], argv: list[str]) -> Forked:
        """The command started in a child process of its own, as it starts."""
        self.start(cwd, env, argv, fork=True)
        line = self.lines.get(timeout=60)
        assert line is not None and line.startswith(FORKED_LINE), line
        return Forked(self, int(line.removeprefix(FORKED_LINE)))

    def result(self, timeout_s: float) -> Ended:
        """How the command started last ended."""
        deadline = time.monotonic() + timeout_s
        out: list[str] = []
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                return Ended(None, "".join(out), "")
            if line.startswith(EXIT_LINE):
                ended = json.loads(line.removeprefix(EXIT_LINE))
                return Ended(ended["code"], "".join(out), ended["err"])
            out.append(line)

    def run(self, cwd: Path, env: dict[str, str], argv: list[str], timeout_s: float) -> Ended:
        self.start(cwd, env, argv)
        return self.result(timeout_s)

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        finally:
            self.process.kill()


class Forked:
    """A forked command's process, as much of `subprocess.Popen` as a test that kills it uses."""

    def __init__(self, rounds: Rounds, pid: int) -> None:
        self.rounds = rounds
        self.pid = pid
        self.pidfd = os.pidfd_open(pid)  # signals reach this process, never a later one of its pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self.pidfd], [], [], 0)[0]:  # it ended
            self.wait()
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)

    def wait(self) -> int:
        if self.returncode is None:
            self.returncode = self.rounds.result(60).code
            assert self.returncode is not None, "the forked command did not end"
            os.close(self.pidfd)
        return self.returncode


def _forked(argv: list[str]) -> None:
    """`argv` run in a child process; its exit status reported once it ended."""
    # The child has this thread alone: a lock another thread held would never be released there.
    assert threading.active_count() == 1, threading.enumerate()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        code = 1
        try:
            code = main(argv)
        finally:
            os._exit(code)
    print(FORKED_LINE + str(pid), flush=True)
    _, status = os.waitpid(pid, 0)
    print(EXIT_LINE + json.dumps({"code": os.waitstatus_to_exitcode(status), "err": ""}), flush=True)


def _serve() -> None:
    for line in sys.stdin:
        command = json.loads(line)
        os.chdir(command["cwd"])
        os.environ.clear()
        os.environ.update(command["env"])
        if command["fork"]:
            _forked(command["argv"])
            continue
        with contextlib.redirect_stderr(io.StringIO()) as err:
            code = main(command["argv"])
        print(EXIT_LINE + json.dumps({"code": code, "err": err.getvalue()}), flush=True)
    # No final collection over everything the commands built (~1 s of CPU at exit): nothing
    # here is checked after the last command.
    gc.freeze()


if __name__ == "__main__":
    _serve()

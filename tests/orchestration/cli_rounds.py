"""`eval-pipeline` commands run one after another in one process, each when the test asks.

Run as a script, this module reads a line on stdin (JSON: `cwd`, `env`, `argv`), runs that command
in that folder with that environment, prints its output, then EXIT_LINE and JSON of its exit code
and what it wrote to stderr; and so on until stdin closes. The first command is what a fresh
process runs (nothing of Dagster or the project is imported before it); later ones do without a
fresh interpreter's imports. `Rounds` is the test's side.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

from eval_pipeline.cli import main

EXIT_LINE = "cli_rounds: exit "


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

    def start(self, cwd: Path, env: dict[str, str], argv: list[str]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"cwd": str(cwd), "env": env, "argv": argv}) + "\n")
        self.process.stdin.flush()

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


def _serve() -> None:
    for line in sys.stdin:
        command = json.loads(line)
        os.chdir(command["cwd"])
        os.environ.clear()
        os.environ.update(command["env"])
        with contextlib.redirect_stderr(io.StringIO()) as err:
            code = main(command["argv"])
        print(EXIT_LINE + json.dumps({"code": code, "err": err.getvalue()}), flush=True)
    # No final collection over everything the commands built (~1 s of CPU at exit): nothing
    # here is checked after the last command.
    gc.freeze()


if __name__ == "__main__":
    _serve()

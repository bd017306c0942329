"""Process groups the tests start and stop: a real `dagster-daemon` for the project, and whether
anything of a group still runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

STOP_GRACE_S = 20.0


def group_alive(pgid: int) -> bool:
    """Whether any process of process group `pgid` still runs."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@contextmanager
def dagster_daemon(home: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`dagster-daemon` on the instance in `home`, loading the code location from the working
    directory as `dg dev` would, in a process group of its own; stopped with everything it started."""
    daemon = str(Path(sys.executable).with_name("dagster-daemon"))
    with log.open("ab") as out:
        process = subprocess.Popen(
            [daemon, "run", "-m", "eval_pipeline.definitions"],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "DAGSTER_HOME": home},
        )
    try:
        yield process
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if group_alive(process.pid):  # its code server and runs
            os.killpg(process.pid, signal.SIGKILL)

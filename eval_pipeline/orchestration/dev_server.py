"""`make ui`: `dg dev` on the project's instance settings, stopping on SIGTERM however started.

`dg dev` and its webserver and daemon read dagster.yaml once, at start: on a fresh home they
would run without the project's pools, run monitoring, storage and log level, so it is written
first. `dg dev` stops on SIGTERM through its SIGINT handler, which Python does not install when
SIGINT is inherited ignored (started from a script or in the background): SIGINT is reset to
its default before `exec`.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from eval_pipeline.location import instance_home
from eval_pipeline.orchestration.execution import prepare_home


def main(argv: list[str]) -> None:
    """Replace this process with `dg dev ARGV...` from the same environment, on the project's
    instance ($DAGSTER_HOME, defaulting to `.dagster_home`)."""
    home = instance_home()
    prepare_home(home)
    dg = str(Path(sys.executable).with_name("dg"))
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.execve(dg, [dg, "dev", *argv], {**os.environ, "DAGSTER_HOME": str(home)})


if __name__ == "__main__":
    main(sys.argv[1:])

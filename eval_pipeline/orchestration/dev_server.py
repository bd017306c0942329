"""`make ui`: `dg dev` on the project's instance settings, stopping on SIGTERM (and SIGINT)
however it was started.

`dg dev`, its webserver and its daemon read dagster.yaml once, when they start: on a fresh
Dagster home they would run without the project's pools, run monitoring, storage and log level
(and show the community pop-up) until a command of ours wrote it. So it is written first, as
every `eval-pipeline` command writes it.

`dg dev` stops on SIGTERM by handing it to its SIGINT handler. Started from a script or in the
background, a process inherits SIGINT *ignored*; Python then installs no handler, and `dg dev`
ignores SIGTERM too, its webserver and daemon running on. Setting SIGINT back to its default
before `exec` lets Python install its handler again in `dg`.
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

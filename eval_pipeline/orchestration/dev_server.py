"""`dg dev` that stops on SIGTERM (and SIGINT), however it was started (`make ui`).

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


def main(argv: list[str]) -> None:
    """Replace this process with `dg dev ARGV...` from the same environment."""
    dg = str(Path(sys.executable).with_name("dg"))
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.execv(dg, [dg, "dev", *argv])


if __name__ == "__main__":
    main(sys.argv[1:])

"""The terminal a progress bar may draw on, opened before Dagster takes the process's output."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def progress_terminal(wanted: bool) -> Iterator[int | None]:
    """A duplicate of stderr for the progress bar while stderr is a terminal, else None: inside
    a Dagster step fds 1 and 2 go to the compute log, so the step's own stderr never is one."""
    if not (wanted and sys.stderr.isatty()):
        yield None
        return
    fd = os.dup(sys.stderr.fileno())
    try:
        yield fd
    finally:
        os.close(fd)

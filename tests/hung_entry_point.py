"""A team's Python entry point whose every call never returns. Each call first leaves a file
named after its process id in the folder `$HUNG_MARK_DIR` (when set), so that a test knows the
call has begun and which process holds it."""

from __future__ import annotations

import itertools
import os
import threading
from pathlib import Path

from eval_pipeline.core.inputs.contract import SystemRequest


def never_returns(request: SystemRequest) -> None:
    del request  # never answered
    folder = os.environ.get("HUNG_MARK_DIR")
    if folder:
        (Path(folder) / str(os.getpid())).touch()
    threading.Event().wait()


_COOLDOWNS = itertools.count(600)


def own_breaker_cooldown() -> float:
    """A breaker cooldown no other test in this process uses. A breaker is one per entry point
    and settings in a process, so a test that opened one would leave it open for the next test
    asking the same entry point with the same settings."""
    return float(next(_COOLDOWNS))

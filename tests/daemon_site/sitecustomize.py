"""Test-only, on PYTHONPATH of the processes a real-daemon test starts: the backfill daemon's
loop waits a fixed 30 s between iterations in Dagster 1.13 (one iteration per dependency level
of the backfill), which made a one-date backfill wait about 90 s. In the `dagster-daemon`
process only, and only when the test sets EVAL_PIPELINE_TEST_DAEMON_INTERVAL_S, the backfill
loop waits that many seconds instead: the same iterations in the same order, sooner. The
constant is set as the backfill loop starts, after the other daemons were made with theirs."""

import os
import sys

_INTERVAL = os.environ.get("EVAL_PIPELINE_TEST_DAEMON_INTERVAL_S")
_SCRIPT = os.path.basename(sys.orig_argv[1]) if len(sys.orig_argv) > 1 else ""

if _INTERVAL and _SCRIPT == "dagster-daemon":
    from typing import Any

    import dagster._daemon.controller as _controller
    import dagster._daemon.daemon as _daemon

    _seconds = float(_INTERVAL)
    _backfill_loop = getattr(_daemon, "execute_backfill_iteration_loop")  # noqa: B009 (not re-exported)

    def _sooner(*args: Any, **kwargs: Any) -> Any:
        _controller.DEFAULT_DAEMON_INTERVAL_SECONDS = _seconds  # type: ignore[assignment]
        return _backfill_loop(*args, **kwargs)

    setattr(_daemon, "execute_backfill_iteration_loop", _sooner)  # noqa: B010

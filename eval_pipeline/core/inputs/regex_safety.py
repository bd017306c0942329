"""Screening crisis patterns for catastrophic backtracking, before anything runs: validation
rejects a pattern that could hang a matcher on one message."""

from __future__ import annotations

import re
import subprocess
import sys

SCREEN_TIMEOUT_S = 2.0
# A quantified group that itself holds a quantifier, e.g. (a+)+ or (\w+\s?)*: the shape that can
# backtrack exponentially. Only such patterns are probed at validation.
_NESTED_QUANTIFIER = re.compile(r"\((?:[^()\\]|\\.)*[+*}](?:[^()\\]|\\.)*\)(?:[+*]|\{\d*,\d*\})")
_PROBES = tuple(
    unit * n + "!" for unit, n in (("a", 28), ("x", 28), ("1", 28), (" ", 28), ("a ", 16), ("ab", 14))
)
# Python's `re` cannot be interrupted, so the probe runs in a child process that can be killed.
_PROBE = "import re, sys\np = re.compile(sys.argv[1], re.IGNORECASE)\nfor s in sys.argv[2:]:\n    p.search(s)"


def backtracking_risk(pattern: str) -> str | None:
    """Why `pattern` can hang a matcher, or None. Our own matching is time-bounded anyway, but the
    team's production detector may use Python's `re`, where such a pattern hangs on one message."""
    if not _NESTED_QUANTIFIER.search(pattern):
        return None
    try:
        subprocess.run(
            [sys.executable, "-c", _PROBE, pattern, *_PROBES],
            timeout=SCREEN_TIMEOUT_S,
            capture_output=True,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return (
            f"backtracks catastrophically (a quantified group holds a quantifier; Python's re took over "
            f"{SCREEN_TIMEOUT_S:g} s on a 30-character message): rewrite it without the nesting"
        )
    return None

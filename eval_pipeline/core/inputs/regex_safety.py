"""Screening crisis patterns for catastrophic backtracking, before anything runs: validation
rejects a pattern that could hang a matcher on one message."""

from __future__ import annotations

import re
import subprocess
import sys

SCREEN_TIMEOUT_S = 2.0
# A quantified group that itself holds a quantifier, e.g. (a+)+ or (\w+\s?)*: the shape that can
# backtrack exponentially; and a quantified group of alternatives, e.g. (x|x)*y. Only such patterns
# are probed at validation.
_NESTED_QUANTIFIER = re.compile(r"\((?:[^()\\]|\\.)*[+*}](?:[^()\\]|\\.)*\)(?:[+*]|\{\d*,\d*\})")
_ALTERNATION = re.compile(r"\((?:[^()\\]|\\.)*\|(?:[^()\\]|\\.)*\)(?:[+*]|\{\d*,\d*\})")
_PROBES = tuple(
    unit * n + "!" for unit, n in (("a", 28), ("x", 28), ("1", 28), (" ", 28), ("a ", 16), ("ab", 14))
)
# Python's `re` cannot be interrupted, so the probe runs in a child process that can be killed.
_PROBE = "import re, sys\np = re.compile(sys.argv[1], re.IGNORECASE)\nfor s in sys.argv[2:]:\n    p.search(s)"


def backtracking_risk(pattern: str) -> str | None:
    """Why `pattern` can hang a matcher, or None. Our own matching is time-bounded anyway, but the
    team's production detector may use Python's `re`, where such a pattern hangs on one message.
    Besides the fixed probes, the literal runs of the risky groups are repeated, so an ambiguity
    over any word (say (ab|a?b)*c) meets text it can match."""
    groups = [m.group(0) for shape in (_NESTED_QUANTIFIER, _ALTERNATION) for m in shape.finditer(pattern)]
    if not groups:
        return None
    words = {w for g in groups for w in re.findall(r"[^\W_]{1,20}", re.sub(r"\\.", " ", g))}
    probes = [*_PROBES, *(word * 28 + "!" for word in sorted(words)[:8])]
    try:
        subprocess.run(
            [sys.executable, "-c", _PROBE, pattern, *probes],
            timeout=SCREEN_TIMEOUT_S,
            capture_output=True,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return (
            f"backtracks catastrophically (a repeated group can match the same text in more than one "
            f"way; Python's re took over {SCREEN_TIMEOUT_S:g} s on a short message): rewrite it so "
            "the repeated part is unambiguous"
        )
    return None

"""Every failing test, worst first: the end of `run`'s output per model, narrowed runs included.

Apart from the "since" block (run_output.py) so that a narrowed run, which is never compared,
does not import the diff models to print its failures. Long lists fold so that a terminal or CI
log stays readable; the file named holds them in full.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from eval_pipeline.core.control_chars import one_line
from eval_pipeline.core.report.failures import Failure, failing_tests
from eval_pipeline.core.rounding import fmt_score
from eval_pipeline.core.scoring.run_document import RunDocument

FOLD_AFTER = 40


def fold(lines: Sequence[str], what: str, where: str, limit: int = FOLD_AFTER) -> list[str]:
    """At most `limit` lines: a longer list keeps its first `limit - 1` and says how many more
    there are, and which file holds them."""
    if len(lines) <= limit:
        return list(lines)
    kept = limit - 1
    return [*lines[:kept], f"… {len(lines) - kept} more {what} in {where}"]


def _failure_line(f: Failure, shared: set[str]) -> str:
    # An errored test whose reason many share (an outage, a KB that could not be indexed) points
    # at the summary's ERRORED line instead of repeating one cause per test.
    reason = (
        "(the reason is in the ERRORED line above)" if f.score is None and f.reason in shared else f.reason
    )
    return one_line(f"{f.test_id} [{f.bank.value}] {fmt_score(f.score)} {f.rule}: {reason}")


def failure_lines(doc: RunDocument, details: str, failures: Sequence[Failure] | None = None) -> list[str]:
    """Every failing test that is not a critical failure (those are listed above), worst first.
    `failures`: `doc`'s failing tests, when the caller has found them already."""
    failures = failing_tests(doc) if failures is None else failures
    others = [f for f in failures if not f.critical]
    if not others:
        return ["  failing tests: none" + (" besides the critical failures above" if failures else "")]
    head = f"  failing tests ({len(others)}, worst first): test [bank] score rule: reason"
    errored = Counter(f.reason for f in others if f.score is None)
    shared = {reason for reason, n in errored.items() if n > 1}
    lines = [_failure_line(f, shared) for f in others]
    return [head, *(f"    {line}" for line in fold(lines, "failing tests", details))]

"""What changed since the previous evaluation, and every failing test: the end of `run`'s output
per model, and the "since last run" section of report.md.

The comparison is the stored regression diff of the model and date (the same one `diff` would
make against the latest earlier evaluation), judged by the same gate as `diff`; `run` prints the
gate's verdict and fails on it only under `--fail-on-regression`. Long lists fold so that a
terminal or CI log stays readable; the file named holds them in full.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from eval_pipeline.core.diff.baseline import RegressionDiff
from eval_pipeline.core.diff.model import DeltaKind, RunDiff
from eval_pipeline.core.report.diffs import gate_lines, headline, health_line
from eval_pipeline.core.report.failures import Failure, failing_tests
from eval_pipeline.core.report.markdown import fmt_score
from eval_pipeline.core.scoring.run_document import REGRESSION_DIFF_FILE, RunDocument
from eval_pipeline.core.verdicts.since import regression_gate

FOLD_AFTER = 40
# What the since block lists, as `diff` orders them: a new critical failure first.
SINCE_KINDS = (DeltaKind.CRITICAL, DeltaKind.REGRESSED, DeltaKind.FIXED, DeltaKind.REMOVED, DeltaKind.ADDED)
REGRESSION_DIFF_MD = REGRESSION_DIFF_FILE.removesuffix(".json") + ".md"


def fold(lines: Sequence[str], what: str, where: str, limit: int = FOLD_AFTER) -> list[str]:
    """At most `limit` lines: a longer list keeps its first `limit - 1` and says how many more
    there are, and which file holds them."""
    if len(lines) <= limit:
        return list(lines)
    kept = limit - 1
    return [*lines[:kept], f"… {len(lines) - kept} more {what} in {where}"]


def _counts(diff: RunDiff) -> str:
    return ", ".join(
        f"{diff.counts[k]} {'new critical' if k is DeltaKind.CRITICAL else k.value}" for k in SINCE_KINDS
    )


def _changes(diff: RunDiff) -> list[str]:
    return [f"{d.kind.value}: {headline(d)}" for k in SINCE_KINDS for d in diff.of_kind(k)]


def since_lines(
    regression: RegressionDiff, details: str, gating: bool, allow_removed: bool = False
) -> list[str]:
    """The console's "since <previous date>" block; `details` names the full regression diff."""
    gate = regression_gate(regression, allow_removed)
    if regression.diff is None or gate is None:
        return [f"  since: {regression.verdict}"]
    diff = regression.diff
    lines = [f"  since {regression.baseline_date}: {health_line(diff)}; {_counts(diff)}"]
    lines += [f"    warning: {w}" for w in diff.warnings]
    lines += [f"    {line}" for line in fold(_changes(diff), "changes", details)]
    verdict = gate_lines(gate)
    verdict[0] = f"regression {verdict[0]}"
    if not gate.passed:
        verdict[0] += " (fails the run)" if gating else " (reported only: --fail-on-regression gates on it)"
    return lines + [f"    {line}" for line in verdict]


def since_markdown(regression: RegressionDiff) -> list[str]:
    """report.md's "since last run" section: what changed, by test, and `diff`'s verdict on it."""
    gate = regression_gate(regression)
    if regression.diff is None or gate is None:
        return ["## Since last run", "", f"{regression.verdict}.", ""]
    diff = regression.diff
    lines = [
        f"## Since last run ({regression.baseline_date})",
        "",
        f"**{health_line(diff)}**; {_counts(diff)}.",
        "",
    ]
    items = [*(f"- ⚠️ {w}" for w in diff.warnings), *(f"- {line}" for line in _changes(diff))]
    lines += [*items, ""] if items else []
    lines += [f"Regression gate (as `diff` decides): **{gate.status.value.upper()}**", ""]
    lines += [*(f"- {r}" for r in gate.reasons), *(f"- note: {n}" for n in gate.notes)]
    return [*lines, "", f"The whole comparison: [{REGRESSION_DIFF_MD}]({REGRESSION_DIFF_MD}).", ""]


def _failure_line(f: Failure, shared: set[str]) -> str:
    # An errored test whose reason many share (an outage, a KB that could not be indexed) points
    # at the summary's ERRORED line instead of repeating one cause per test.
    reason = (
        "(the reason is in the ERRORED line above)" if f.score is None and f.reason in shared else f.reason
    )
    return f"{f.test_id} [{f.bank.value}] {fmt_score(f.score)} {f.rule}: {reason}"


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
    return [
        head,
        *(f"    {line}" for line in fold(lines, "failing tests", details)),
    ]

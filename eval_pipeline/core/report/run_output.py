"""What changed since the previous evaluation: `run`'s "since" block per model (a full run's), and
the "since last run" section of report.md: the stored regression diff, judged by `diff`'s gate,
which fails `run` only under `--fail-on-regression`. Long lists fold (core/report/failures.py).
"""

from __future__ import annotations

from eval_pipeline.core.control_chars import one_line
from eval_pipeline.core.diff.baseline import RegressionDiff, baseline_label
from eval_pipeline.core.diff.model import DeltaKind, RunDiff
from eval_pipeline.core.markdown_text import text
from eval_pipeline.core.report.diff_text import (
    detail_lines,
    gate_lines,
    headline,
    health_line,
    kind_title,
    span_lines,
)
from eval_pipeline.core.report.failures import fold
from eval_pipeline.core.scoring.run_document import REGRESSION_DIFF_FILE
from eval_pipeline.core.verdicts.since import regression_gate

# What the since block counts, as `diff` orders them: a new critical failure first.
SINCE_KINDS = (DeltaKind.CRITICAL, DeltaKind.REGRESSED, DeltaKind.FIXED, DeltaKind.REMOVED, DeltaKind.ADDED)
# What it lists: those, and a collapse the score hides; beneath each test that fails a
# comparison, the first lines of why, as `diff` prints them (collapse, KB changes, stage).
LISTED_KINDS = (DeltaKind.CRITICAL, DeltaKind.CONTENT_COLLAPSE, *SINCE_KINDS[1:])
EXPLAINED_KINDS = frozenset({DeltaKind.CRITICAL, DeltaKind.CONTENT_COLLAPSE, DeltaKind.REGRESSED})
WHY_LINES = 3
REGRESSION_DIFF_MD = REGRESSION_DIFF_FILE.removesuffix(".json") + ".md"


def since_counts(diff: RunDiff) -> list[tuple[str, int]]:
    """How many tests of each kind the since block counts."""
    return [("new critical" if k is DeltaKind.CRITICAL else k.value, diff.counts[k]) for k in SINCE_KINDS]


def _counts(diff: RunDiff) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in since_counts(diff))


def _changes(diff: RunDiff) -> list[tuple[str, list[str]]]:
    """Each listed test's line, and why it moved when it fails the comparison."""
    return [
        (f"{kind_title(d.kind)}: {headline(d)}", detail_lines(d)[:WHY_LINES] if k in EXPLAINED_KINDS else [])
        for k in LISTED_KINDS
        for d in diff.of_kind(k)
    ]


def since_lines(
    regression: RegressionDiff, details: str, gating: bool, allow_removed: bool = False
) -> list[str]:
    """The console's "since <previous date>" block; `details` names the full regression diff."""
    gate = regression_gate(regression, allow_removed)
    if regression.diff is None or gate is None:
        return [one_line(f"  since: {regression.verdict}")]
    diff = regression.diff
    lines = [f"  since {baseline_label(regression)}: {health_line(diff)}; {_counts(diff)}"]
    lines += [f"    warning: {w}" for w in diff.warnings]
    lines += [f"    {line}" for line in span_lines(diff)]
    changes = _changes(diff)
    # Folded by test: a test's why lines stay with it.
    for i, line in enumerate(fold([head for head, _ in changes], "changes", details)):
        why = changes[i][1] if i < len(changes) and line == changes[i][0] else []
        lines += [f"    {line}", *(f"      why: {w}" for w in why)]
    verdict = gate_lines(gate)
    verdict[0] = f"regression {verdict[0]}"
    if not gate.passed:
        verdict[0] += " (fails the run)" if gating else " (reported only: --fail-on-regression gates on it)"
    return [one_line(line) for line in [*lines, *(f"    {line}" for line in verdict)]]


def since_markdown(regression: RegressionDiff) -> list[str]:
    """report.md's "since last run" section: what changed, by test, and `diff`'s verdict on it."""
    gate = regression_gate(regression)
    if regression.diff is None or gate is None:
        return ["## Since last run", "", f"{text(regression.verdict)}.", ""]
    diff = regression.diff
    lines = [
        f"## Since last run ({text(baseline_label(regression))})",
        "",
        f"**{text(health_line(diff))}**; {_counts(diff)}.",
        "",
    ]
    items = [f"- ⚠️ {text(w)}" for w in diff.warnings] + [f"- {text(line)}" for line in span_lines(diff)]
    for head, why in _changes(diff):
        items += [f"- {text(head)}", *(f"  - why: {text(w)}" for w in why)]
    lines += [*items, ""] if items else []
    lines += [f"Regression gate (as `diff` decides): **{gate.status.value.upper()}**", ""]
    lines += [*(f"- {text(r)}" for r in gate.reasons), *(f"- note: {text(n)}" for n in gate.notes)]
    return [*lines, "", f"The whole comparison: [{REGRESSION_DIFF_MD}]({REGRESSION_DIFF_MD}).", ""]

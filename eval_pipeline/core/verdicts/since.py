"""The run's verdict on what changed since the model's previous evaluation: lost coverage and
another project always count (a run must never pass because its critical tests vanished); the
rest is `diff`'s decision on the stored regression diff, gating only under `--fail-on-regression`.
"""

from __future__ import annotations

from eval_pipeline.core.diff.baseline import RegressionDiff
from eval_pipeline.core.verdicts.coverage import coverage_verdict
from eval_pipeline.core.verdicts.regression_gate import DiffGate, diff_gate, incomparable_reasons
from eval_pipeline.core.verdicts.run_gate import GateStatus, Verdict


def regression_gate(regression: RegressionDiff, allow_removed: bool = False) -> DiffGate | None:
    """`diff`'s gate on the stored comparison; None when there was nothing earlier to compare."""
    if regression.diff is None:
        return None
    return diff_gate(regression.diff, allow_removed=allow_removed)


def baseline_too_old(regression: RegressionDiff, max_baseline_age_days: int | None) -> list[str]:
    age = regression.baseline_age_days
    if max_baseline_age_days is None or age is None or age <= max_baseline_age_days:
        return []
    return [
        f"the baseline {regression.model} @ {regression.baseline_date} is {age} days old, "
        f"over the project's maximum baseline age of {max_baseline_age_days} days"
    ]


def since_verdict(
    regression: RegressionDiff | None,
    *,
    fail_on_regression: bool,
    allow_removed: bool,
    max_baseline_age_days: int | None = None,
) -> Verdict:
    """The run's verdict on the comparison with its baseline; a baseline older than the project's
    maximum age fails it whatever the comparison says."""
    if regression is None:
        unknown = ["no regression diff was written"] if fail_on_regression else []
        return Verdict(status=GateStatus.UNEVALUABLE if unknown else GateStatus.PASSED, reasons=unknown)
    if old := baseline_too_old(regression, max_baseline_age_days):
        return Verdict(status=GateStatus.FAILED, reasons=old)
    if regression.diff is None:
        return Verdict(status=GateStatus.PASSED, reasons=[])
    if fail_on_regression:
        gate = diff_gate(regression.diff, allow_removed=allow_removed)
        return Verdict(status=gate.status, reasons=gate.reasons)
    lost = incomparable_reasons(regression.diff) + coverage_verdict(regression.diff, allow_removed)[0]
    return Verdict(status=GateStatus.FAILED if lost else GateStatus.PASSED, reasons=lost)

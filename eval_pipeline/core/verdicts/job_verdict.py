"""A CI job's verdict on a change: the `run` that made the head evaluation (its exit code and its
release gate) and the diff against the baseline (coverage and regressions) together. A CI comment
leads with it, so it can never show a green tick on a job that fails."""

from __future__ import annotations

from eval_pipeline.core.errors import EXIT_GATE, EXIT_OK
from eval_pipeline.core.verdicts.regression_gate import DiffGate
from eval_pipeline.core.verdicts.run_gate import GateDecision, GateStatus, Verdict

CRITICAL_NAMED = 5  # critical failures named in the verdict
_RANK = {GateStatus.PASSED: 0, GateStatus.FAILED: 1, GateStatus.UNEVALUABLE: 2}
_OF_EXIT = {EXIT_OK: GateStatus.PASSED, EXIT_GATE: GateStatus.FAILED}


def _release_reasons(release: GateDecision, critical: list[str]) -> list[str]:
    named = ", ".join(critical[:CRITICAL_NAMED]) + (", …" if len(critical) > CRITICAL_NAMED else "")
    return [
        f"{reason} ({named})" if reason.endswith("critical failure(s)") and named else reason
        for reason in release.reasons
    ]


def job_verdict(
    run_exit: int, release: GateDecision | None, critical: list[str], regression: DiffGate
) -> Verdict:
    """The worst of the run's exit code, its release gate (None: it wrote none) with the critical
    failures' test ids named, and the diff gate; each that failed gives a reason, the release gate first."""
    parts: list[tuple[GateStatus, str]] = []
    if release is None:
        parts.append((GateStatus.UNEVALUABLE, "release gate: no decision was written beside the head"))
    elif not release.passed:
        parts.append((release.status, "release gate: " + "; ".join(_release_reasons(release, critical))))
    if not regression.passed:
        parts.append((regression.status, "coverage and regressions: " + "; ".join(regression.reasons)))
    run_status = _OF_EXIT.get(run_exit, GateStatus.UNEVALUABLE)
    if run_status is not GateStatus.PASSED and all(_RANK[s] < _RANK[run_status] for s, _ in parts):
        parts.append((run_status, f"`run` exited {run_exit} (its output says why)"))
    status = max((s for s, _ in parts), key=_RANK.__getitem__, default=GateStatus.PASSED)
    return Verdict(status=status, reasons=[reason for _, reason in parts])

"""A CI job's verdict joins the run's exit code, its release gate and the diff gate: it passes
only when all three did, and names what failed, the release gate first."""

from __future__ import annotations

import pytest

from eval_pipeline.core.scoring.aggregate import Health
from eval_pipeline.core.verdicts.job_verdict import job_verdict
from eval_pipeline.core.verdicts.regression_gate import DiffGate
from eval_pipeline.core.verdicts.run_gate import GateDecision, GateStatus

CLEAN = DiffGate(status=GateStatus.PASSED, strict=False, reasons=[], notes=[])
REGRESSED = DiffGate(
    status=GateStatus.FAILED, strict=False, reasons=["1 stable semantic regression(s): S-1"], notes=[]
)


def _release(*reasons: str) -> GateDecision:
    status = GateStatus.FAILED if reasons else GateStatus.PASSED
    return GateDecision(
        model="m",
        date="2026-11-20",
        status=status,
        passed=not reasons,
        health=Health.CRITICAL if reasons else Health.EXCELLENT,
        combined_score=80.0,
        fail_under=None,
        reasons=list(reasons),
    )


@pytest.mark.parametrize(
    ("run_exit", "release", "critical", "diff", "status", "reasons"),
    [
        (0, _release(), [], CLEAN, GateStatus.PASSED, []),
        (
            1,
            _release("7 critical failure(s)"),
            [f"C-{i}" for i in range(7)],
            CLEAN,
            GateStatus.FAILED,
            ["release gate: 7 critical failure(s) (C-0, C-1, C-2, C-3, C-4, …)"],
        ),
        (
            1,
            _release("combined score 65.0 is under 70"),
            [],
            REGRESSED,
            GateStatus.FAILED,
            [
                "release gate: combined score 65.0 is under 70",
                "coverage and regressions: 1 stable semantic regression(s): S-1",
            ],
        ),
        (1, _release(), [], CLEAN, GateStatus.FAILED, ["`run` exited 1 (its output says why)"]),
        (3, _release(), [], CLEAN, GateStatus.UNEVALUABLE, ["`run` exited 3 (its output says why)"]),
        (
            3,
            None,
            [],
            CLEAN,
            GateStatus.UNEVALUABLE,
            ["release gate: no decision was written beside the head"],
        ),
    ],
)
def test_the_job_passes_only_when_the_run_and_both_gates_did(
    run_exit: int,
    release: GateDecision | None,
    critical: list[str],
    diff: DiffGate,
    status: GateStatus,
    reasons: list[str],
) -> None:
    verdict = job_verdict(run_exit, release, critical, diff)
    assert (verdict.status, verdict.reasons) == (status, reasons)
    assert verdict.passed is (run_exit == 0 and status is GateStatus.PASSED)

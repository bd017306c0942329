"""The release gate: may this model, on this KB, be shipped on the strength of this run?

UNEVALUABLE when a bank that ran could not be judged (too few scored tests): nobody ships on an
unknown. Else it FAILS for a critical failure, for more errored tests than `max_errored`, or for
a combined score under `fail_under` (unrounded). Every evaluation writes a decision, so a stale
"passed" never outlives a failing run.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from eval_pipeline.core.fileio import TextFile, read_json_model
from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.rounding import fmt_score
from eval_pipeline.core.scoring.aggregate import Health
from eval_pipeline.core.scoring.run_document import DocumentError, RunDocument

# An errored test is an unknown outcome, not a pass: by default not one is allowed.
DEFAULT_MAX_ERRORED = 0


class GateStatus(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    UNEVALUABLE = "unevaluable"  # could not evaluate: the verdict is unknown


class Verdict(FrozenModel):
    """A verdict joining several gates: the worst of their statuses, and why each that failed did."""

    status: GateStatus
    reasons: list[str]

    @property
    def passed(self) -> bool:
        return self.status is GateStatus.PASSED


class Gates(FrozenModel):
    """What a run must meet: a combined score of at least `fail_under` (None: any score), and at
    most `max_errored` errored tests."""

    fail_under: float | None = None
    max_errored: int = DEFAULT_MAX_ERRORED


class GateDecision(FrozenModel):
    model: str
    date: str
    status: GateStatus
    passed: bool
    health: Health
    combined_score: float | None
    fail_under: float | None
    max_errored: int = DEFAULT_MAX_ERRORED
    errored: int = 0
    reasons: list[str] = Field(default_factory=list)
    scope: str = Field(default="full", description="'full', or the narrowed run's scope")


def gate_decision(
    doc: RunDocument,
    fail_under: float | None,
    max_errored: int = DEFAULT_MAX_ERRORED,
    scope: str = "full",
) -> GateDecision:
    agg = doc.aggregate
    unknown = agg.unevaluable_reasons()
    reasons = [f"could not evaluate {line}" for line in unknown]
    if agg.health is Health.CRITICAL:
        reasons.append(f"{len(agg.critical_failures)} critical failure(s)")
    if agg.errored_count > max_errored:
        reasons.append(f"{agg.errored_count} errored test(s), more than --max-errored {max_errored}")
    if fail_under is not None and (agg.combined_score is None or agg.combined_score < fail_under):
        shown = "unknown" if agg.combined_score is None else fmt_score(agg.combined_score)
        reasons.append(f"combined score {shown} is under {fail_under}")
    status = GateStatus.UNEVALUABLE if unknown else GateStatus.FAILED if reasons else GateStatus.PASSED
    return GateDecision(
        model=doc.provenance.model,
        date=doc.provenance.date,
        status=status,
        passed=status is GateStatus.PASSED,
        health=agg.health,
        combined_score=agg.combined_score,
        fail_under=fail_under,
        max_errored=max_errored,
        errored=agg.errored_count,
        reasons=reasons,
        scope=scope,
    )


def read_gate(path: TextFile) -> GateDecision:
    """A stored decision (gate.json beside its results), or DocumentError naming the file."""
    return read_json_model(path, GateDecision, DocumentError, "gate decision")

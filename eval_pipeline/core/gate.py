"""The release gate: does a run pass (no critical failure, combined score not under a floor)?"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from eval_pipeline.core.aggregate import Health
from eval_pipeline.core.run_document import RunDocument


class GateDecision(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    date: str
    passed: bool
    health: Health
    combined_score: float | None
    fail_under: float | None
    reasons: list[str]


def gate_decision(doc: RunDocument, fail_under: float | None) -> GateDecision:
    agg = doc.aggregate
    reasons = []
    if agg.health is Health.CRITICAL:
        reasons.append(f"{len(agg.critical_failures)} critical failure(s)")
    if fail_under is not None and (agg.combined_score is None or agg.combined_score < fail_under):
        reasons.append(f"combined score {agg.combined_score} is under {fail_under}")
    return GateDecision(
        model=doc.provenance.model,
        date=doc.provenance.date,
        passed=not reasons,
        health=agg.health,
        combined_score=agg.combined_score,
        fail_under=fail_under,
        reasons=reasons,
    )

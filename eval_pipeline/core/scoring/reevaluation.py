"""What re-evaluating a chosen set of tests into an existing evaluation records: why (errored
tests retried, or semantic regressions re-tried to tell noise from change), which tests of which
banks, when, how many trials and what it cost, and for a noise confirmation each test's decision.

The document keeps every re-evaluation it received, in order, so a reader (and `diff`) can see
which rows were replaced or added after the day's evaluation, and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.mechanisms.retrieval import SemanticRetrieval
from eval_pipeline.core.scoring.evaluation import MechanismOutput


class Why(StrEnum):
    RETRY_ERRORED = "retry-errored"
    NOISE_CONFIRMATION = "noise-confirmation"


class Decision(StrEnum):
    CONFIRMED = "confirmed"  # the re-trials' mean still regresses against the base: a real regression
    DISMISSED = "dismissed"  # the re-trials' mean passes: the regression was noise


class Confirmation(FrozenModel):
    """One semantic regression re-tried against its base."""

    test_id: str
    base_score: float
    head_score: float = Field(description="The day's score before the re-trials")
    retrial_scores: list[int] = Field(description="Scored re-trials (an errored one has no score)")
    retrial_mean: float | None
    decision: Decision


class Reevaluation(FrozenModel):
    """One re-evaluation merged into a document."""

    why: Why
    at: datetime
    test_ids: list[str]
    trials: list[int] = Field(description="The semantic trial indices evaluated again or added")
    banks: dict[Mechanism, list[str]] = Field(
        default_factory=dict, description="The tests evaluated again, per bank (1.8+)"
    )
    api_calls: int = 0
    cost_usd: float = 0.0
    base: str | None = Field(default=None, description="noise-confirmation: the model@date compared with")
    confirmations: list[Confirmation] = Field(default_factory=list)

    def decided(self, decision: Decision) -> list[str]:
        return [c.test_id for c in self.confirmations if c.decision is decision]


def decisions_against(records: Sequence[Reevaluation], base: str) -> dict[str, Decision]:
    """What re-trials decided about regressions against `base` (model@date); the latest
    decision per test wins. Re-trials against another base decide nothing here."""
    out: dict[str, Decision] = {}
    for record in records:
        if record.why is Why.NOISE_CONFIRMATION and record.base == base:
            out.update({c.test_id: c.decision for c in record.confirmations})
    return out


class StoredReevaluation(FrozenModel):
    """A re-evaluation with what it observed, as kept beside a run, so the report asset re-scores
    it (against the date's expectations) every time it rebuilds the document: the semantic
    retrievals, and the team's system's answers for state, pattern and always tests."""

    record: Reevaluation
    retrievals: list[SemanticRetrieval]
    system_outputs: list[MechanismOutput] = Field(
        default_factory=list, description="The team's system's answers, each naming its mechanism"
    )


class StoredReevaluations(BaseModel):
    """Every re-evaluation into one evaluation: the run that made its retrievals, since a fresh
    evaluation of the same model and date starts without them."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    evaluation_id: str
    reevaluations: list[StoredReevaluation] = Field(default_factory=list)

    def for_evaluation(self, evaluation_id: str | None) -> list[StoredReevaluation]:
        return self.reevaluations if evaluation_id == self.evaluation_id else []

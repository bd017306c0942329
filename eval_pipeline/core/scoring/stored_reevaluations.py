"""What a re-evaluation observed, kept beside the run it went into, so the report asset re-scores
it every time it rebuilds the document. Only a re-evaluation reads or writes these records."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.mechanisms.retrieval import SemanticRetrieval
from eval_pipeline.core.scoring.evaluation import MechanismOutput
from eval_pipeline.core.scoring.reevaluation import Reevaluation


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

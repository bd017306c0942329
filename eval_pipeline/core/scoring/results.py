"""Per-test results for each mechanism: what happened, how it scored, or why it errored.

Every result has an explicit `status`. An errored test carries its reason and no score; it
is counted apart and never averaged as 0 or 100.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.core.inputs.banks import AnyTest, Expectations, PatternType, UserState
from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.inputs.kb import Label, UserType
from eval_pipeline.core.mechanisms.pattern import PatternMatch
from eval_pipeline.core.mechanisms.retrieval import Candidate, Selection, Usage
from eval_pipeline.core.scoring.points import RankViolation, ScoreOutcome

# 1.1: aggregate.unevaluable_banks, unrounded scores; 1.2: provenance.inputs_snapshot;
# 1.3: aggregate.implementations
# 1.4: provenance.rerank_mode and provenance.prompt_cache; 1.5: provenance.code_version
# 1.6: provenance.identity (project, entity digests, bank test ids, mechanism sources)
# 1.7: provenance.reevaluations; 1.8: provenance.reevaluations[].banks (the system's answers retried)
# 1.9: ir_metrics; any-of and graded expectations, outcomes and attributions
# 1.10: graded points from nDCG@10 of the final ranking (evaluation.graded_ndcg); nothing relevant
#       selected is a failed test with a no_relevant_selected penalty, no longer a hard fail
# 1.11: provenance.original_ids (an imported collection's ids, for diffs to name)
RESULT_SCHEMA_VERSION = "1.11"


class ResultStatus(StrEnum):
    SCORED = "scored"
    ERRORED = "errored"


class ResultBase(BaseModel):
    """What every mechanism's per-test result has: id, status, error or outcome."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    test_id: str
    name: str = ""
    status: ResultStatus
    error: str | None = None
    outcome: ScoreOutcome | None = None

    @property
    def score(self) -> int | None:
        return self.outcome.score if self.outcome is not None else None

    @property
    def hard_fail(self) -> bool:
        return self.outcome is not None and self.outcome.hard_fail

    @property
    def no_relevant_selected(self) -> bool:
        """A graded test that selected nothing relevant: failed whatever its score."""
        return self.outcome is not None and self.outcome.no_relevant_selected


class SemanticEvaluation(FrozenModel):
    """How an ordered selection compares to the expectations, before scoring."""

    primary_pass: bool  # exact primaries and an any-of set selected, and something relevant if graded
    missing_primary: list[str]
    missing_any: list[str] = Field(default_factory=list, description="The any-of set, when none was selected")
    no_relevant_selected: bool = False
    graded_ndcg: float | None = Field(
        default=None,
        description="A graded test's nDCG@10 of its final ranking (1.10+; nDCG@6 of the selection before)",
    )
    secondary_missing: list[str]
    false_positives: list[str]
    rank_violations: list[RankViolation]


class SemanticResult(ResultBase):
    mechanism: Literal["semantic"] = "semantic"
    model: str
    trial: int = 0
    category: Label
    topics: list[str]
    prompt: str
    expectations: Expectations
    expectation_source: str
    expectation_conflict: bool = False
    candidates: list[Candidate] = Field(default_factory=list)
    selections: list[Selection] = Field(default_factory=list)
    evaluation: SemanticEvaluation | None = None
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0
    latency_ms: float = 0.0


class StateResult(ResultBase):
    mechanism: Literal["state"] = "state"
    user_state: UserState
    triggered_handlers: list[str]
    expected_handlers: list[str]
    not_expected_handlers: list[str]
    missing_handlers: list[str]
    wrong_handlers: list[str]


class PatternResult(ResultBase):
    mechanism: Literal["pattern"] = "pattern"
    prompt: str
    pattern_type: PatternType
    is_critical: bool
    matches: list[PatternMatch]
    matched_entities: list[str]
    expected_matches: list[str]
    expected_secondary: list[str]
    not_expected_matches: list[str]
    secondary_missing: list[str]
    false_positives: list[str]
    critical_failure: bool = False
    critical_reason: str | None = None


class AlwaysResult(ResultBase):
    mechanism: Literal["always"] = "always"
    user_type: UserType
    loaded_entities: list[str]
    expected_always: list[str]
    missing: list[str]


AnyResult = SemanticResult | StateResult | PatternResult | AlwaysResult
RowT = TypeVar("RowT", bound=ResultBase)


def result_of(kind: type[RowT], test: AnyTest, **found: Any) -> RowT:
    """A `kind` row of `test`, scored unless `found` says otherwise: the test's own fields (id, name,
    what it expects) copied, beside what the mechanism `found`."""
    given = {f: getattr(test, f) for f in kind.model_fields if f in type(test).model_fields}
    return kind(**given, **{"status": ResultStatus.SCORED, **found})


def errored_result(kind: type[RowT], test: AnyTest, reason: str) -> RowT:
    """A test whose output could not be learned (a pattern timed out, the system under test
    failed): the reason kept, no score, nothing found."""
    ours = type(test).model_fields
    empty: dict[str, list[str]] = {
        f: [] for f, info in kind.model_fields.items() if info.is_required() and f not in ours
    }
    return result_of(kind, test, **{**empty, "status": ResultStatus.ERRORED, "error": reason})

"""The contract between eval_pipeline and the team's own system (docs/http_target.md).

One request per test and mechanism; the answer carries the part that mechanism asks for. The
HTTP target sends these as JSON, the Python target passes the request model to the team's
callable; both validate the answer with `parse_answer`, so a malformed answer errors the test
with the same reason whichever way it came. JSON Schemas of both sides ship in `schemas/`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from eval_pipeline.core.errors import CouldNotEvaluate
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.inputs.stage_depths import CANDIDATE_K, SELECTION_K

# 2: every mechanism is asked (`mechanism`), and each answer must carry the part it was asked for.
CONTRACT_VERSION: Literal[2] = 2
# The answer field each mechanism must carry (semantic also needs `candidates`).
ANSWER_FIELD: dict[Mechanism, str] = {
    Mechanism.SEMANTIC: "selections",
    Mechanism.STATE: "triggered_handlers",
    Mechanism.PATTERN: "pattern_matches",
    Mechanism.ALWAYS: "always_loaded",
}


class ContractViolation(CouldNotEvaluate, ValueError):
    """An answer that does not keep the contract (one line, naming the first problem)."""


class SystemRequest(FrozenModel):
    """One test, as the team's system sees it."""

    contract_version: Literal[2] = CONTRACT_VERSION
    mechanism: Mechanism = Field(description="Which part of the answer is scored")
    message: str = Field(description="The user message; empty for state and always tests")
    user_type: str | None = Field(description="The test's user type, or null when it gives none")
    user_state: dict[str, Any] = Field(description="The test's user state (empty when it gives none)")
    top_k_candidates: int = CANDIDATE_K
    top_k: int = SELECTION_K


class _Answer(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="ignore", frozen=True)


class AnswerCandidate(_Answer):
    entity_id: str
    score: float


class AnswerSelection(_Answer):
    entity_id: str
    reason: str | None = None


class AnswerPatternMatch(_Answer):
    entity_id: str
    kind: Literal["crisis", "keyword"] = "crisis"
    pattern: str | None = None
    matched_text: str | None = None


class AnswerUsage(_Answer):
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cache_creation_input_tokens: int = Field(default=0, ge=0)
    cache_read_input_tokens: int = Field(default=0, ge=0)
    cost_usd: float = Field(default=0.0, ge=0)


class SystemAnswer(_Answer):
    """What the system loaded. Only the asked mechanism's part is required; unknown fields are
    ignored (return debugging data alongside if you like)."""

    candidates: list[AnswerCandidate] | None = None
    selections: list[AnswerSelection] | None = Field(default=None, max_length=SELECTION_K)
    triggered_handlers: list[str] | None = None
    pattern_matches: list[AnswerPatternMatch] | None = None
    always_loaded: list[str] | None = None
    usage: AnswerUsage | None = None


def _violation(problem: str) -> ContractViolation:
    return ContractViolation(f"target response breaks the contract: {problem}")


def parse_answer(payload: object, mechanism: Mechanism) -> SystemAnswer:
    """Validate an answer to a `mechanism` request; ContractViolation names the first problem."""
    try:
        answer = SystemAnswer.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "response"
        raise _violation(f"{where}: {first['msg']}") from None
    required = ["candidates"] if mechanism is Mechanism.SEMANTIC else []
    for name in [*required, ANSWER_FIELD[mechanism]]:
        if getattr(answer, name) is None:
            raise _violation(f"{name}: required for a {mechanism.value} request")
    ids = [s.entity_id for s in answer.selections or []]
    if len(set(ids)) != len(ids):
        raise _violation("duplicate selections")
    return answer

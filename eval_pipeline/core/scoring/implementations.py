"""Which implementation produced each bank: eval_pipeline's built-in reference, or the team's
system (over HTTP or a Python entry point), and how the system's answers become results.

A model assigns each mechanism to one or the other. The reference outputs are computed once per
date and shared by every model; the system's are the model's own, and replace the reference
for exactly the banks the model assigns to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.loading import Banks
from eval_pipeline.core.mechanisms.pattern import PatternMatch
from eval_pipeline.core.scoring.aggregate import REFERENCE
from eval_pipeline.core.scoring.evaluation import (
    MechanismOutput,
    Scope,
    score_always,
    score_pattern,
    score_state,
)
from eval_pipeline.core.scoring.results import AlwaysResult, PatternResult, StateResult

# The contract's models load with a request to the team's system: scoring builds none.
if TYPE_CHECKING:
    from eval_pipeline.core.inputs.contract import SystemAnswer, SystemRequest

# Mechanism -> "reference", or the kind of the team's system ("http", "python").
Implementations = Mapping[Mechanism, str]


def system_requests(
    banks: Banks, scope: Scope, mechanisms: Iterable[Mechanism]
) -> list[tuple[str, SystemRequest]]:
    """(test id, request) for each test of the scope in the given non-semantic banks."""
    from eval_pipeline.core.inputs.contract import SystemRequest

    chosen = set(mechanisms)
    out: list[tuple[str, SystemRequest]] = []
    if Mechanism.STATE in chosen:
        out += [
            (
                t.test_id,
                SystemRequest(mechanism=Mechanism.STATE, message="", user_type=None, user_state=t.user_state),
            )
            for t in scope.select(Mechanism.STATE, banks.state_tests)
        ]
    if Mechanism.PATTERN in chosen:
        out += [
            (
                t.test_id,
                SystemRequest(mechanism=Mechanism.PATTERN, message=t.prompt, user_type=None, user_state={}),
            )
            for t in scope.select(Mechanism.PATTERN, banks.pattern_tests)
        ]
    if Mechanism.ALWAYS in chosen:
        out += [
            (
                t.test_id,
                SystemRequest(
                    mechanism=Mechanism.ALWAYS, message="", user_type=t.user_type, user_state=t.user_state
                ),
            )
            for t in scope.select(Mechanism.ALWAYS, banks.always_tests)
        ]
    return out


def answer_output(test_id: str, mechanism: Mechanism, answer: SystemAnswer) -> MechanismOutput:
    """The part of a (validated) answer that `mechanism` scores, as a mechanism output."""
    if mechanism is Mechanism.PATTERN:
        matches = [
            PatternMatch(
                kind=m.kind,
                entities=[m.entity_id],
                pattern=m.pattern or "",
                matched_text=m.matched_text or "",
            )
            for m in answer.pattern_matches or []
        ]
        entities = list(dict.fromkeys(m.entity_id for m in answer.pattern_matches or []))
        return MechanismOutput(test_id=test_id, mechanism=mechanism, entities=entities, matches=matches)
    loaded = answer.triggered_handlers if mechanism is Mechanism.STATE else answer.always_loaded
    return MechanismOutput(test_id=test_id, mechanism=mechanism, entities=list(loaded or []))


class SystemResults(BaseModel):
    """A model's implementation per bank, and its system's scored results for the banks it
    assigns to the system (None: the bank comes from the reference)."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    implementations: dict[Mechanism, str]
    state: list[StateResult] | None = None
    pattern: list[PatternResult] | None = None
    always: list[AlwaysResult] | None = None
    errored: int = Field(default=0, description="System calls that failed or broke the contract")

    def judged(
        self, state: list[StateResult], pattern: list[PatternResult], always: list[AlwaysResult]
    ) -> tuple[list[StateResult], list[PatternResult], list[AlwaysResult]]:
        """The state, pattern and always results the model is judged on: its system's where it
        has one, else the given reference results."""
        return (
            self.state if self.state is not None else state,
            self.pattern if self.pattern is not None else pattern,
            self.always if self.always is not None else always,
        )


def score_system(
    banks: Banks, implementations: Implementations, outputs: Sequence[MechanismOutput]
) -> SystemResults:
    """Score the system's outputs for the banks assigned to it."""

    def of(mechanism: Mechanism) -> list[MechanismOutput] | None:
        if implementations.get(mechanism, REFERENCE) == REFERENCE:
            return None
        return [o for o in outputs if o.mechanism is mechanism]

    state, pattern, always = of(Mechanism.STATE), of(Mechanism.PATTERN), of(Mechanism.ALWAYS)
    return SystemResults(
        implementations=dict(implementations),
        state=score_state(banks.state_tests, state) if state is not None else None,
        pattern=score_pattern(banks.pattern_tests, pattern) if pattern is not None else None,
        always=score_always(banks.always_tests, always) if always is not None else None,
        errored=sum(o.error is not None for o in outputs),
    )

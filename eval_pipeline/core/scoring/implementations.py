"""Which implementation produced each bank: eval_pipeline's built-in reference, or the team's
system (over HTTP or a Python entry point), and how the system's answers become results.

The reference outputs are computed once per date and shared by every model; the system's are
the model's own, and replace the reference for exactly the banks the model assigns to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.loading import Banks
from eval_pipeline.core.scoring.aggregate import REFERENCE
from eval_pipeline.core.scoring.evaluation import MechanismOutput, Scope
from eval_pipeline.core.scoring.registry import DETERMINISTIC, BankResults
from eval_pipeline.core.scoring.results import AlwaysResult, AnyResult, PatternResult, StateResult

# The contract's models load with a request to the team's system: scoring builds none.
if TYPE_CHECKING:
    from eval_pipeline.core.inputs.contract import SystemAnswer, SystemRequest

# Mechanism -> "reference", or the kind of the team's system ("http", "python").
Implementations = Mapping[Mechanism, str]


def system_requests(
    banks: Banks, scope: Scope, mechanisms: Iterable[Mechanism]
) -> list[tuple[str, SystemRequest]]:
    """(test id, request) for each test of the scope in the given banks (semantic tests are
    retrievals: the providers ask for those)."""
    chosen = set(mechanisms)
    return [
        (t.test_id, d.request(t))
        for d in DETERMINISTIC
        if d.mechanism in chosen
        for t in scope.select(d.mechanism, d.tests(banks))
    ]


def answer_output(test_id: str, mechanism: Mechanism, answer: SystemAnswer) -> MechanismOutput:
    """The part of a (validated) answer that `mechanism` scores, as a mechanism output."""
    (d,) = [d for d in DETERMINISTIC if d.mechanism is mechanism]
    return d.answered(test_id, answer)


class SystemResults(BaseModel):
    """A model's implementation per bank, and its system's scored results for the banks it
    assigns to the system (None: the bank comes from the reference). Stored as the
    `system_results` asset: one field per deterministic mechanism, named for it."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    implementations: dict[Mechanism, str]
    state: list[StateResult] | None = None
    pattern: list[PatternResult] | None = None
    always: list[AlwaysResult] | None = None
    errored: int = Field(default=0, description="System calls that failed or broke the contract")

    @property
    def results(self) -> dict[Mechanism, list[AnyResult]]:
        """The system's results per bank it answers."""
        banks = {d.mechanism: getattr(self, d.mechanism.value) for d in DETERMINISTIC}
        return {m: rows for m, rows in banks.items() if rows is not None}

    def judged(self, reference: BankResults) -> dict[Mechanism, Sequence[AnyResult]]:
        """The results the model is judged on: its system's where it has one, else the given
        reference results."""
        return {**reference, **self.results}


def score_system(
    banks: Banks, implementations: Implementations, outputs: Sequence[MechanismOutput]
) -> SystemResults:
    """Score the system's outputs for the banks assigned to it."""
    scored = {
        d.mechanism.value: d.score(d.tests(banks), [o for o in outputs if o.mechanism is d.mechanism])
        for d in DETERMINISTIC
        if implementations.get(d.mechanism, REFERENCE) != REFERENCE
    }
    errored = sum(o.error is not None for o in outputs)
    return SystemResults.model_validate(
        {"implementations": dict(implementations), **scored, "errored": errored}
    )

"""How an always test scores: 100 when every expected entity loaded, else 0."""

from __future__ import annotations

from collections.abc import Sequence

from eval_pipeline.core.inputs.banks import AlwaysTest
from eval_pipeline.core.scoring.points import all_or_nothing
from eval_pipeline.core.scoring.results import AlwaysResult, ResultStatus


def errored_always_test(test: AlwaysTest, reason: str) -> AlwaysResult:
    """A test whose loaded entities could not be learned (the system under test failed)."""
    return AlwaysResult(
        test_id=test.test_id,
        name=test.name,
        status=ResultStatus.ERRORED,
        error=reason,
        user_type=test.user_type,
        loaded_entities=[],
        expected_always=test.expected_always,
        missing=[],
    )


def evaluate_always_test(test: AlwaysTest, loaded: Sequence[str]) -> AlwaysResult:
    missing = [e for e in test.expected_always if e not in loaded]
    return AlwaysResult(
        test_id=test.test_id,
        name=test.name,
        status=ResultStatus.SCORED,
        outcome=all_or_nothing(missing),
        user_type=test.user_type,
        loaded_entities=list(loaded),
        expected_always=test.expected_always,
        missing=missing,
    )

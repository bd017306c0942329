"""Always mechanism: the entities loaded for every conversation of a user type."""

from __future__ import annotations

from collections.abc import Sequence

from eval_pipeline.core.inputs.banks import AlwaysTest
from eval_pipeline.core.inputs.kb import Entity, LoadMode, UserType
from eval_pipeline.core.scoring.points import all_or_nothing
from eval_pipeline.core.scoring.results import AlwaysResult, TestStatus


def always_loaded(user_type: UserType, entities: Sequence[Entity]) -> list[str]:
    """ALWAYS entities whose `user_types` is empty (everyone) or names this user type."""
    return [
        e.entity_id
        for e in entities
        if e.load_mode is LoadMode.ALWAYS and (not e.user_types or user_type in e.user_types)
    ]


def errored_always_test(test: AlwaysTest, reason: str) -> AlwaysResult:
    """A test whose loaded entities could not be learned (the system under test failed)."""
    return AlwaysResult(
        test_id=test.test_id,
        name=test.name,
        status=TestStatus.ERRORED,
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
        status=TestStatus.SCORED,
        outcome=all_or_nothing(missing),
        user_type=test.user_type,
        loaded_entities=list(loaded),
        expected_always=test.expected_always,
        missing=missing,
    )

"""How a state test scores: the handlers triggered against those expected and not expected."""

from __future__ import annotations

from collections.abc import Sequence

from eval_pipeline.core.inputs.banks import StateTest
from eval_pipeline.core.scoring.points import PenaltyKind, penalties_for, score
from eval_pipeline.core.scoring.results import ResultStatus, StateResult


def errored_state_test(test: StateTest, reason: str) -> StateResult:
    """A test whose handlers could not be learned (the system under test failed): no score."""
    return StateResult(
        test_id=test.test_id,
        name=test.name,
        status=ResultStatus.ERRORED,
        error=reason,
        user_state=test.user_state,
        triggered_handlers=[],
        expected_handlers=test.expected_handlers,
        not_expected_handlers=test.not_expected_handlers,
        missing_handlers=[],
        wrong_handlers=[],
    )


def evaluate_state_test(test: StateTest, triggered: Sequence[str]) -> StateResult:
    missing = [h for h in test.expected_handlers if h not in triggered]
    wrong = [h for h in test.not_expected_handlers if h in triggered]
    outcome = score(missing, penalties_for(PenaltyKind.WRONG_HANDLER, wrong))
    return StateResult(
        test_id=test.test_id,
        name=test.name,
        status=ResultStatus.SCORED,
        outcome=outcome,
        user_state=test.user_state,
        triggered_handlers=list(triggered),
        expected_handlers=test.expected_handlers,
        not_expected_handlers=test.not_expected_handlers,
        missing_handlers=missing,
        wrong_handlers=wrong,
    )

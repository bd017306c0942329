"""How a pattern test scores: what matched against the test's expectations, and when a miss is a
critical failure."""

from __future__ import annotations

from eval_pipeline.core.inputs.banks import PatternTest, PatternType
from eval_pipeline.core.mechanisms.pattern import PatternMatch, matched_entities
from eval_pipeline.core.scoring.points import PenaltyKind, penalties_for, score
from eval_pipeline.core.scoring.results import PatternResult, ResultStatus


def critical_reason(test: PatternTest, missing: list[str], false_pos: list[str]) -> str | None:
    """Critical failures: a missed crisis, or a benign message that triggered crisis content."""
    if not test.is_critical:
        return None
    if test.pattern_type is PatternType.CRISIS and missing:
        return f"crisis not detected: missing {', '.join(missing)}"
    if test.pattern_type is PatternType.NEGATIVE and false_pos:
        return f"benign message triggered {', '.join(false_pos)}"
    return None


def errored_pattern_test(test: PatternTest, reason: str) -> PatternResult:
    """A test whose matching could not finish: no score, the reason kept, never a pass."""
    return PatternResult(
        test_id=test.test_id,
        name=test.name,
        status=ResultStatus.ERRORED,
        error=reason,
        prompt=test.prompt,
        pattern_type=test.pattern_type,
        is_critical=test.is_critical,
        matches=[],
        matched_entities=[],
        expected_matches=test.expected_matches,
        expected_secondary=test.expected_secondary,
        not_expected_matches=test.not_expected_matches,
        secondary_missing=[],
        false_positives=[],
    )


def evaluate_pattern_test(test: PatternTest, matches: list[PatternMatch]) -> PatternResult:
    entities = matched_entities(matches)
    missing = [e for e in test.expected_matches if e not in entities]
    secondary_missing = [e for e in test.expected_secondary if e not in entities]
    false_pos = [e for e in test.not_expected_matches if e in entities]
    penalties = penalties_for(PenaltyKind.SECONDARY_MISSING, secondary_missing) + penalties_for(
        PenaltyKind.FALSE_POSITIVE, false_pos
    )
    reason = critical_reason(test, missing, false_pos)
    return PatternResult(
        test_id=test.test_id,
        name=test.name,
        status=ResultStatus.SCORED,
        outcome=score(missing, penalties),
        prompt=test.prompt,
        pattern_type=test.pattern_type,
        is_critical=test.is_critical,
        matches=matches,
        matched_entities=entities,
        expected_matches=test.expected_matches,
        expected_secondary=test.expected_secondary,
        not_expected_matches=test.not_expected_matches,
        secondary_missing=secondary_missing,
        false_positives=false_pos,
        critical_failure=reason is not None,
        critical_reason=reason,
    )

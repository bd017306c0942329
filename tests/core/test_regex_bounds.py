"""A crisis regex can never hang a run: screened at validation, time-bounded when matching."""

from __future__ import annotations

import pytest

from eval_pipeline.core.inputs import regex_safety
from eval_pipeline.core.inputs.banks import CrisisPattern, Mechanism, PatternRules, PatternTest, PatternType
from eval_pipeline.core.inputs.regex_safety import backtracking_risk
from eval_pipeline.core.mechanisms import pattern as pattern_matching
from eval_pipeline.core.scoring.aggregate import aggregate
from eval_pipeline.core.scoring.registry import PATTERN, pattern_outputs
from eval_pipeline.core.scoring.results import ResultStatus

CATASTROPHIC = "(a+)+$"  # hangs Python's re; the regex engine we match with copes with it
RUNAWAY = r"(.*){1,32000}[bc]"  # runs away even in the regex engine


@pytest.mark.timeout(120)  # a hang guard for the suite, not a speed assertion
@pytest.mark.parametrize(
    "pattern",
    # The last three: alternatives that match the same text inside a repeated group.
    [CATASTROPHIC, r"(\w+\s?)+$", RUNAWAY, r"(x+x+)+y", "(x|x)*y", "(ab|a?b)*c", r"(?:help|hel+p)+\bme"],
)
def test_catastrophic_patterns_are_refused_at_validation(
    pattern: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each probe of these runs until the screen's timeout kills it: 2 s of a core per pattern.
    # They backtrack for minutes; a child Python starts in a few hundredths of a second, so half
    # a second tells them apart as well. The ordinary patterns below keep the full timeout (no
    # false alarm under load).
    monkeypatch.setattr(regex_safety, "SCREEN_TIMEOUT_S", 0.5)
    risk = backtracking_risk(pattern)
    assert risk is not None and risk.startswith("backtracks catastrophically")


@pytest.mark.parametrize(
    "pattern",
    [
        r"\bwant to die\b",
        r"(?:end|take) (?:it|my life)",
        r"(\s+\w+)?",
        r"kill(ing)? (my|him)self",
        r"(?:very |really )*(?:sad|hopeless)",  # repeated alternatives, but never the same text
    ],
)
def test_ordinary_patterns_pass_the_screen(pattern: str) -> None:
    assert backtracking_risk(pattern) is None


@pytest.mark.timeout(60)  # a hang guard for the suite, not a speed assertion
def test_a_runaway_pattern_makes_its_test_errored_never_a_pass_or_a_hang(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # It runs away for good: a quarter of a second's bound cuts it as surely as the full second.
    monkeypatch.setattr(pattern_matching, "MATCH_TIMEOUT_S", 0.25)
    rules = PatternRules(
        crisis_patterns=[CrisisPattern(pattern=RUNAWAY, entities=["crisis"], is_critical=True)]
    )
    test = PatternTest(
        test_id="P-1",
        prompt="a" * 40 + "!",
        expected_matches=["crisis"],
        pattern_type=PatternType.CRISIS,
        is_critical=True,
    )
    (output,) = pattern_outputs(rules, [test])
    assert output.error is not None and "timed out after 0.25 s" in output.error
    (result,) = PATTERN.score([test], [output])
    assert result.status is ResultStatus.ERRORED and result.score is None and not result.critical_failure
    agg = aggregate({Mechanism.PATTERN: [result]})
    assert agg.errored_count == 1 and agg.health.value == "UNKNOWN"  # unknown, not a pass

from __future__ import annotations

import pytest

from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.report.markdown import render_markdown
from eval_pipeline.core.scoring.aggregate import aggregate
from eval_pipeline.core.scoring.results import ResultStatus
from eval_pipeline.core.scoring.trials import Outcome, by_test
from tests.run_docs import doc, sem

# Scores: [a, b] → 100, [a] → 90 (secondary b missing), [b] → 0 (primary a missing).
FLAKY = [sem("F", ["a", "b"], trial=2), sem("F", ["b"], trial=0), sem("F", ["a"], trial=1)]
STEADY = [sem("S", ["a"], trial=t) for t in range(3)]


def test_trials_are_grouped_per_test_in_trial_order() -> None:
    flaky, steady = by_test([*FLAKY, *STEADY])
    assert [r.trial for r in flaky.rows] == [0, 1, 2]
    assert (flaky.test_id, flaky.trials, flaky.scores) == ("F", 3, [0, 90, 100])
    assert flaky.score == pytest.approx(63.333, abs=1e-3) and flaky.spread == (0, 100, 44.97)
    assert flaky.trial_outcomes == [Outcome.FAIL, Outcome.PASS, Outcome.PASS]
    assert flaky.flaky and not flaky.pass_all and flaky.hard_fail
    assert steady.score == 90 and steady.spread == (90, 90, 0.0)
    assert not steady.flaky and steady.pass_all and not steady.hard_fail


def test_an_errored_trial_is_not_a_pass_and_all_errored_has_no_score() -> None:
    (partly,) = by_test([sem("E", ["a", "b"], trial=0), sem("E", [], trial=1, error="timeout")])
    assert partly.score == 100 and partly.status is ResultStatus.SCORED
    assert partly.flaky and not partly.pass_all
    (errored,) = by_test([sem("E", [], error="timeout")])
    assert (
        errored.score is None and errored.status is ResultStatus.ERRORED and errored.outcome is Outcome.ERROR
    )


def test_aggregate_counts_each_test_once_with_the_mean_of_its_trials() -> None:
    agg = aggregate({Mechanism.SEMANTIC: [*FLAKY, *STEADY]})
    bank = agg.banks[Mechanism.SEMANTIC]
    assert (bank.tests, bank.scored, bank.passed, bank.hard_fails) == (2, 2, 2, 1)
    assert bank.average == pytest.approx(76.667, abs=1e-3)  # (63.33 + 90) / 2, not a mean of six trials
    assert bank.distribution == {"100": 0, "90-99": 1, "80-89": 0, "70-79": 0, "60-69": 1, "1-59": 0, "0": 0}
    assert agg.topic_scores["t"].tests == 2 and agg.category_scores["one_liner"].tests == 2
    assert agg.expectation_sources == {"original": 2, "opus": 0, "human_override": 0}  # once per test


def test_report_shows_spread_flaky_tests_and_pass_all() -> None:
    md = render_markdown(doc([*FLAKY, *STEADY]))
    assert "## Trials (semantic)" in md
    assert (
        "3 trials per test; pass^3 (every trial passed): 1 of 2 tests; flaky (outcome differs across " in md
    )
    assert "| F | 3 | 63.3 | 0–100 | 45.0 | no | yes |" in md
    assert "| S |" not in md.split("## Trials (semantic)")[1].split("##")[0]  # steady tests are not listed
    assert "## Trials" not in render_markdown(doc([sem("S", ["a"])]))

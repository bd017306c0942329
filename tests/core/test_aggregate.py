from __future__ import annotations

from eval_pipeline.core.expectations.resolution import ResolvedExpectation
from eval_pipeline.core.inputs.banks import (
    AlwaysTest,
    Mechanism,
    PatternTest,
    PatternType,
    SemanticTest,
    StateTest,
)
from eval_pipeline.core.mechanisms.retrieval import Selection, SemanticRetrieval
from eval_pipeline.core.scoring.aggregate import Health, aggregate, health_status
from eval_pipeline.core.scoring.registry import (
    evaluate_always_test,
    evaluate_pattern_test,
    evaluate_state_test,
)
from eval_pipeline.core.scoring.results import ResultStatus, SemanticResult
from eval_pipeline.core.scoring.semantic import evaluate_semantic_test


def semantic(test_id: str, selected: list[str], topics: list[str], errored: bool = False) -> SemanticResult:
    test = SemanticTest(
        test_id=test_id,
        category="one_liner",
        topics=topics,
        prompt="p",
        expected_primary=["a"],
        expected_secondary=["b"],
    )
    resolved = ResolvedExpectation(
        test_id=test_id, expectations=test.original_expectations(), source="original"
    )
    retrieval = SemanticRetrieval(
        test_id=test_id,
        model="m",
        status="errored" if errored else "ok",
        selections=[Selection(entity_id=e, rank=i + 1) for i, e in enumerate(selected)],
        error="reranker: HTTP 503 after 5 attempts" if errored else None,
        cost_usd=0.01,
    )
    return evaluate_semantic_test(test, resolved, retrieval)


def test_errored_tests_are_counted_apart_and_not_averaged() -> None:
    results = [
        semantic("S1", ["a", "b"], ["t1"]),
        semantic("S2", ["a"], ["t1"]),
        semantic("S3", [], ["t2"], errored=True),
    ]
    assert results[2].status is ResultStatus.ERRORED and results[2].score is None
    agg = aggregate({Mechanism.SEMANTIC: results})
    bank = agg.banks[Mechanism.SEMANTIC]
    assert (bank.tests, bank.scored, bank.errored, bank.average) == (3, 2, 1, 95.0)
    assert agg.errored_count == 1 and agg.hard_fail_count == 0
    assert agg.topic_scores["t2"].average is None and agg.topic_scores["t2"].errored == 1
    assert agg.health is Health.GOOD  # 95 but one unknown outcome keeps it out of EXCELLENT
    assert agg.cost_usd == 0.03


def test_weights_renormalise_over_banks_run() -> None:
    sem = [semantic("S1", ["a"], ["t"])]  # 90
    state = [evaluate_state_test(StateTest(test_id="ST", user_state={}, expected_handlers=["h"]), [])]  # 0
    agg = aggregate({Mechanism.SEMANTIC: sem, Mechanism.STATE: state})
    assert agg.weights == {Mechanism.SEMANTIC: 0.8, Mechanism.STATE: 0.2}
    assert agg.combined_score == 72.0
    assert agg.health is Health.FAIR


def test_hard_fails_are_counted_per_test() -> None:
    always = [
        evaluate_always_test(AlwaysTest(test_id=f"A{i}", user_type="PARENT", expected_always=["p"]), loaded)
        for i, loaded in enumerate([["p"], ["p"], []])
    ]
    agg = aggregate({Mechanism.ALWAYS: always})
    assert agg.hard_fail_count == 1  # not 3, as the specification's shortcut would count


def test_critical_failure_makes_health_critical() -> None:
    crisis = PatternTest(
        test_id="PC",
        prompt="i want to die",
        pattern_type=PatternType.CRISIS,
        is_critical=True,
        expected_matches=["handler_crisis"],
    )
    agg = aggregate(
        {
            Mechanism.PATTERN: [evaluate_pattern_test(crisis, [])],
            Mechanism.SEMANTIC: [semantic("S", ["a", "b"], ["t"])],
        }
    )
    assert agg.health is Health.CRITICAL
    assert [c.test_id for c in agg.critical_failures] == ["PC"]
    assert agg.pattern_type_scores["crisis"].critical_failures == 1


def test_health_thresholds() -> None:
    assert health_status(95, 0, 0, 0) is Health.EXCELLENT
    assert health_status(95, 0, 1, 0) is Health.GOOD
    assert health_status(80, 0, 0, 0) is Health.GOOD
    assert health_status(79.9, 0, 0, 0) is Health.FAIR
    assert health_status(69.9, 0, 0, 0) is Health.POOR
    assert health_status(None, 0, 0, 3) is Health.UNKNOWN
    assert health_status(None, 1, 0, 0) is Health.CRITICAL


def test_handler_scores_attribute_each_handler() -> None:
    t1 = StateTest(test_id="1", user_state={}, expected_handlers=["h1"], not_expected_handlers=["h2"])
    t2 = StateTest(test_id="2", user_state={}, expected_handlers=["h2"])
    results = [evaluate_state_test(t1, ["h1", "h2"]), evaluate_state_test(t2, [])]
    scores = aggregate({Mechanism.STATE: results}).handler_scores
    assert scores["h1"].fired_when_expected == 1 and scores["h1"].average_of_involved_tests == 80.0
    h2 = scores["h2"]
    assert (h2.expected_in, h2.fired_when_expected, h2.forbidden_in, h2.fired_when_forbidden) == (
        1,
        0,
        1,
        1,
    )
    assert h2.average_of_involved_tests == 40.0


def test_nothing_run_is_unknown() -> None:
    agg = aggregate({})
    assert agg.combined_score is None and agg.health is Health.UNKNOWN and agg.total_tests == 0

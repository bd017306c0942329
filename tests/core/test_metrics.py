from __future__ import annotations

import math

import pytest

from eval_pipeline.core.inputs.banks import Expectations
from eval_pipeline.core.scoring.metrics import PerTestMetrics, Stage, attributions, mean_metrics, run_metrics
from eval_pipeline.core.scoring.results import SemanticResult
from tests.run_docs import sem

PRIMARY_A_SECONDARY_BD = Expectations(expected_primary=["a"], expected_secondary=["b", "d"])


def metrics_of(result: SemanticResult) -> PerTestMetrics:
    (only,) = run_metrics([result])[0]
    return only


def _dcg(gains: list[int]) -> float:
    return sum(g / math.log2(place + 1) for place, g in enumerate(gains, start=1))


def test_perfect_selection_scores_one_everywhere() -> None:
    m = metrics_of(sem("T", ["a", "b"]))
    assert (m.ndcg_6, m.recall_6, m.mrr_primary, m.candidate_recall_15) == (1.0, 1.0, 1.0, 1.0)


def test_library_values_equal_hand_computed_ones() -> None:
    result = sem("T", ["c", "b", "a"], exp=PRIMARY_A_SECONDARY_BD, candidates=["c", "b", "a", "e"])
    m = metrics_of(result)
    # Selected gains c=0, b=1, a=2; the ideal order is a=2, b=1, d=1.
    assert m.ndcg_6 == pytest.approx(_dcg([0, 1, 2]) / _dcg([2, 1, 1]))
    assert m.ndcg_6 == pytest.approx(0.520909, abs=1e-6)
    assert m.recall_6 == pytest.approx(2 / 3)  # b and a of a, b, d
    assert m.mrr_primary == pytest.approx(1 / 3)  # the first primary is third
    assert m.candidate_recall_15 == pytest.approx(2 / 3)  # d never became a candidate


def test_secondary_first_does_not_count_for_mrr_of_primaries() -> None:
    m = metrics_of(sem("T", ["b", "x", "a"], candidates=["b", "x", "a"]))
    assert m.mrr_primary == pytest.approx(1 / 3)
    assert m.recall_6 == 1.0
    assert m.ndcg_6 == pytest.approx(_dcg([1, 0, 2]) / _dcg([2, 1]))


def test_nothing_relevant_selected_scores_zero() -> None:
    m = metrics_of(sem("T", ["x", "y"], candidates=["x", "y", "b"]))
    assert (m.ndcg_6, m.recall_6, m.mrr_primary) == (0.0, 0.0, 0.0)
    assert m.candidate_recall_15 == pytest.approx(1 / 2)


def test_a_run_measured_at_once_equals_each_test_measured_alone() -> None:
    # One evaluator serves the whole run: no query's qrels may leak into another's score.
    results = [
        sem("A", ["c", "b", "a"], exp=PRIMARY_A_SECONDARY_BD, candidates=["c", "b", "a", "e"]),
        sem("B", ["b", "x", "a"], candidates=["b", "x", "a"]),
        sem("C", ["x", "y"], candidates=["x", "y", "b"]),
        sem("D", [], candidates=[]),
        sem("A", ["a", "b"], trial=1),
    ]
    assert run_metrics(results)[0] == [metrics_of(r) for r in results]
    assert run_metrics(results)[0][3].ndcg_6 == 0.0


def test_stage_attribution_of_hard_fails_and_errors() -> None:
    pool = ["c", "d", "e", "f", "g", "h", "i", "a"]
    two_primaries = Expectations(expected_primary=["a", "z"])
    results = [
        sem("RERANK", ["c", "d"], candidates=pool),  # a was candidate #8, not selected
        sem("EMBED", ["c", "d"], candidates=["c", "d"]),  # a never reached the top 15
        sem("MIXED", ["c"], exp=two_primaries, candidates=pool),  # z absent: the embedding stage
        sem("ERR", [], error="embedder: timeout"),
        sem("OK", ["a", "b"]),
    ]
    found = {a.test_id: a for a in attributions(results)}
    assert set(found) == {"RERANK", "EMBED", "MIXED", "ERR"}
    assert found["RERANK"].stage is Stage.RERANKER and found["RERANK"].text == "reranker: a was candidate #8"
    assert found["EMBED"].text == "embedding: a not in the top 15"
    assert found["MIXED"].text == "embedding: a was candidate #8, z not in the top 15"
    assert found["ERR"].stage is Stage.ERROR and found["ERR"].detail == "embedder: timeout"
    assert [m.test_id for m in run_metrics(results)[0]] == ["RERANK", "EMBED", "MIXED", "OK"]


def test_means_count_each_test_once_whatever_its_trials() -> None:
    metrics = run_metrics(
        [sem("A", ["a", "b"], trial=0), sem("A", ["x"], trial=1, candidates=["x"]), sem("B", ["a", "b"])]
    )[0]
    means = mean_metrics(metrics)
    assert means is not None and means.ndcg_6 == 0.75  # A: (1 + 0) / 2, B: 1
    assert mean_metrics([]) is None

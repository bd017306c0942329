from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eval_pipeline.core.inputs.banks import AlwaysTest
from eval_pipeline.core.scoring.points import (
    BUCKETS,
    PENALTY_POINTS,
    Penalty,
    PenaltyKind,
    RankViolation,
    bucket_for,
    distribution,
    label_for,
    penalties_for,
    rank_penalties,
    score,
)
from eval_pipeline.core.scoring.registry import evaluate_always_test

RV = RankViolation(expected_higher="a", expected_lower="b", actual_higher_rank=3, actual_lower_rank=1)


def _p(secondary: int = 0, false_pos: int = 0, rank: int = 0, wrong: int = 0) -> list[Penalty]:
    return (
        penalties_for(PenaltyKind.SECONDARY_MISSING, [f"s{i}" for i in range(secondary)])
        + penalties_for(PenaltyKind.FALSE_POSITIVE, [f"f{i}" for i in range(false_pos)])
        + rank_penalties([RV] * rank)
        + penalties_for(PenaltyKind.WRONG_HANDLER, [f"h{i}" for i in range(wrong)])
    )


@pytest.mark.parametrize(
    ("missing", "penalties", "expected"),
    [
        ([], _p(), 100),  # Perfect
        ([], _p(secondary=1), 90),  # 1 secondary miss
        ([], _p(false_pos=1), 80),  # 1 false positive
        ([], _p(secondary=2, rank=1), 70),  # 2 secondary + 1 rank violation
        ([], _p(secondary=1, false_pos=2), 50),  # 1 secondary + 2 false positives
        (["primary"], _p(), 0),  # primary not found
    ],
)
def test_specification_score_examples(missing: list[str], penalties: list[Penalty], expected: int) -> None:
    assert score(missing, penalties).score == expected


def test_hard_fail_ignores_penalties_and_names_missing_primary() -> None:
    out = score(["gray_rock"], _p(secondary=1))
    assert out.hard_fail and out.missing_primary == ["gray_rock"] and out.penalties == []
    assert out.label == "Hard fail"


def test_wrong_handler_costs_twenty() -> None:
    assert score([], _p(wrong=2)).score == 60


def test_penalty_text_names_entity_and_points() -> None:
    (p,) = _p(secondary=1)
    assert p.text == "-10 secondary missing: s0"
    (r,) = rank_penalties([RV])
    assert r.text == "-10 rank violation: a (#3) should rank above b (#1)"


@pytest.mark.parametrize(
    ("value", "label"),
    [
        (100, "Perfect"),
        (99, "Minor issue"),
        (90, "Minor issue"),
        (89, "Notable issues"),
        (80, "Notable issues"),
        (79, "Concerning"),
        (70, "Concerning"),
        (69, "Barely acceptable"),
        (60, "Barely acceptable"),
        (59, "Failing"),
        (1, "Failing"),
        (0, "Hard fail"),
    ],
)
def test_labels(value: int, label: str) -> None:
    assert label_for(value) == label


def test_distribution_buckets() -> None:
    scores = [100, 95, 90, 85, 70, 65, 59, 1, 0]
    assert distribution(scores) == {
        "100": 1,
        "90-99": 2,
        "80-89": 1,
        "70-79": 1,
        "60-69": 1,
        "1-59": 2,
        "0": 1,
    }
    assert tuple(distribution([])) == BUCKETS
    assert bucket_for(60) == "60-69"


def test_always_all_or_nothing() -> None:
    test = AlwaysTest(test_id="A", user_type="member", expected_always=["persona"])
    assert evaluate_always_test(test, ["persona", "other"]).score == 100
    assert evaluate_always_test(test, ["other"]).score == 0
    assert evaluate_always_test(test, []).hard_fail


counts = st.integers(min_value=0, max_value=12)


@given(counts, counts, counts, counts)
def test_score_is_never_below_zero_or_above_hundred(s: int, f: int, r: int, w: int) -> None:
    value = score([], _p(s, f, r, w)).score
    assert 0 <= value <= 100


@given(counts, counts, counts, counts, st.sampled_from(list(PENALTY_POINTS)))
def test_more_penalties_never_raise_a_score(s: int, f: int, r: int, w: int, extra: PenaltyKind) -> None:
    base = _p(s, f, r, w)
    more = base + (
        rank_penalties([RV]) if extra is PenaltyKind.RANK_VIOLATION else penalties_for(extra, ["x"])
    )
    assert score([], more).score <= score([], base).score
    assert score(["p"], base).score <= score([], base).score

"""Agreement between calibrator proposals and human decisions, on hand-built sets with known kappa."""

from __future__ import annotations

import numpy as np
import pytest

from eval_pipeline.core.calibration.agreement import (
    ROLES,
    Judgement,
    agreement,
    confusion,
    kappa,
    markdown,
    role_pairs,
)
from eval_pipeline.core.inputs.banks import Expectations


def _exp(
    primary: list[str], secondary: list[str] | None = None, not_expected: list[str] | None = None
) -> Expectations:
    return Expectations(
        expected_primary=primary, expected_secondary=secondary or [], not_expected=not_expected or []
    )


CALIBRATOR = _exp(["x"], ["y"])
# Three shapes of one test's decision about two entities x and y (roles P = primary, S = secondary):
SAME = CALIBRATOR  # x: P/P, y: S/S
SWAPPED = _exp(["y"], ["x"])  # x: P/S, y: S/P
BOTH_PRIMARY = _exp(["x", "y"])  # as the calibrator's side: x: P/P, y: P/S against SAME


def _judgement(n: int, calibrator: Expectations, human: Expectations, topic: str = "t") -> Judgement:
    return Judgement(
        test_id=f"T-{n:03d}",
        topics=[topic],
        kind="edited" if calibrator != human else "accepted",
        calibrator=calibrator,
        calibrator_reasoning="model says so",
        human=human,
        human_reasoning="clinician says so" if calibrator != human else None,
        by="Dr Lee",
        source="review R",
    )


def _set(agree: int, swapped: int, both_primary: int) -> list[Judgement]:
    shapes = (
        [(CALIBRATOR, SAME)] * agree
        + [(CALIBRATOR, SWAPPED)] * swapped
        + [(BOTH_PRIMARY, SAME)] * both_primary
    )
    return [_judgement(i, c, h) for i, (c, h) in enumerate(shapes)]


def test_kappa_matches_a_hand_computed_two_by_two_table() -> None:
    report = agreement(_set(agree=10, swapped=2, both_primary=4), resamples=2000, seed=1)
    # By hand, (calibrator, human) over 32 entity pairs:
    #   agree x10:        (P,P) 10, (S,S) 10
    #   swapped x2:       (P,S) 2,  (S,P) 2
    #   both primary x4:  (P,P) 4,  (P,S) 4
    pp, ps, sp, ss = 14, 6, 2, 10
    n = pp + ps + sp + ss
    observed = (pp + ss) / n  # 0.75
    chance = ((pp + ps) * (pp + sp) + (sp + ss) * (ps + ss)) / n**2  # (20*16 + 12*16) / 1024 = 0.5
    known = (observed - chance) / (1 - chance)
    assert known == pytest.approx(0.5)
    o = report.overall
    assert (o.tests, o.pairs) == (16, 32)
    assert o.percent_agreement == pytest.approx(75.0)
    assert o.kappa == pytest.approx(known)
    assert o.confusion[0][:2] == [pp, ps] and o.confusion[1][:2] == [sp, ss]
    assert o.kappa_ci is not None and o.kappa_ci[0] <= known <= o.kappa_ci[1]
    assert len(report.disagreements) == ps + sp
    swapped = next(d for d in report.disagreements if d.test_id == "T-010")
    assert (swapped.calibrator_role, swapped.human_role) == ("primary", "secondary")
    assert (swapped.calibrator_reasoning, swapped.human_reasoning) == ("model says so", "clinician says so")


def test_perfect_agreement_is_kappa_one() -> None:
    o = agreement(_set(agree=8, swapped=0, both_primary=0), resamples=500).overall
    assert o.kappa == pytest.approx(1.0) and o.percent_agreement == pytest.approx(100.0)
    assert o.kappa_ci == pytest.approx((1.0, 1.0))


def test_chance_level_agreement_is_kappa_zero() -> None:
    # Half the tests agree, half swap: every role is used equally by both sides, so the observed
    # agreement (0.5) is exactly what chance predicts.
    report = agreement(_set(agree=10, swapped=10, both_primary=0), resamples=2000, seed=3)
    o = report.overall
    assert o.percent_agreement == pytest.approx(50.0)
    assert o.kappa == pytest.approx(0.0, abs=1e-12)
    assert o.kappa_ci is not None and o.kappa_ci[0] < 0 < o.kappa_ci[1]


def test_bootstrap_is_seeded() -> None:
    judgements = _set(agree=10, swapped=2, both_primary=4)
    assert agreement(judgements, seed=5).overall.kappa_ci == agreement(judgements, seed=5).overall.kappa_ci


def test_every_role_is_compared_and_unnamed_entities_are_absent() -> None:
    calibrator = _exp(["a"], ["b"], ["c"])
    human = _exp(["a"], [], ["b", "d"])
    pairs = role_pairs(_judgement(1, calibrator, human))
    assert pairs == [
        ("a", "primary", "primary"),
        ("b", "secondary", "not_expected"),
        ("c", "not_expected", "absent"),
        ("d", "absent", "not_expected"),
    ]
    matrix = confusion((a, b) for _, a, b in pairs)
    assert matrix.shape == (len(ROLES), len(ROLES)) and matrix.sum() == 4


def test_kappa_is_undefined_without_variation() -> None:
    assert kappa(np.zeros((4, 4), dtype=np.int64)) is None
    one_role = np.zeros((4, 4), dtype=np.int64)
    one_role[0, 0] = 5
    assert kappa(one_role) is None


def test_topics_are_scored_only_with_enough_tests() -> None:
    judgements = _set(agree=6, swapped=0, both_primary=0) + [
        _judgement(100 + i, CALIBRATOR, SWAPPED, topic="rare") for i in range(2)
    ]
    report = agreement(judgements, min_topic_tests=5, resamples=200)
    assert set(report.by_topic) == {"t"} and report.thin_topics == {"rare": 2}
    text = markdown(report)
    assert "| t | 6 | 12 | 100.0% | 1.00" in text and "Too few to score: rare (2)." in text
    assert "clinician says so" in text

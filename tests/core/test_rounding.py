"""One rounding rule for every shown score: one decimal, rounded down; a change rounded toward
zero (eval_pipeline/core/rounding.py)."""

from __future__ import annotations

from eval_pipeline.core.report.diff_text import points
from eval_pipeline.core.rounding import fmt_score, shown_change, shown_score


def test_a_score_is_shown_rounded_down_to_one_decimal() -> None:
    assert shown_score(89.26) == 89.2 and fmt_score(89.26) == "89.2"
    assert shown_score(89.99) == 89.9 and shown_score(90.0) == 90.0
    assert shown_score(0.7 * 100) == 70.0  # 70.00000000000001 stays 70.0
    assert shown_score(69.99999999999999) == 70.0  # float noise below a whole score is not a drop


def test_a_change_is_shown_rounded_toward_zero() -> None:
    assert shown_change(3.37) == 3.3 and shown_change(-3.37) == -3.3 and shown_change(0.0) == 0.0


def test_the_diff_shows_trial_means_as_the_report_does() -> None:
    assert points(200 / 3) == fmt_score(200 / 3) == "66.6"
    assert points(90.0) == "90" and points(-10.0, signed=True) == "-10" and points(None) == "—"
    assert points(10 / 3, signed=True) == "+3.3"

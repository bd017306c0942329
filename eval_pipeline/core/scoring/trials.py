"""One test across its trials: a model may run each semantic test N times (`trials: N`).

A test counts once in every average, with the mean of its scored trials; its spread, whether
its outcome is stable (not flaky) and whether every trial passed (pass^N) say how far a single
run of it can be trusted. Mechanisms without trials give one row per test, and the same view.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Generic, TypeVar

from eval_pipeline.core.scoring.points import DEFAULT_PASS_THRESHOLD
from eval_pipeline.core.scoring.results import ResultBase, ResultStatus, SemanticResult

R = TypeVar("R", bound=ResultBase, covariant=True)  # read-only rows: a semantic test is a test


class Outcome(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"  # no score: the outcome is unknown, which is not a pass


def outcome_of(score: float | None, threshold: int, no_relevant_selected: bool = False) -> Outcome:
    """Pass at or above the threshold, except a graded test that selected nothing relevant: its
    points can reach the threshold (they follow nDCG@10 of the whole ranking), yet it failed."""
    if score is None:
        return Outcome.ERROR
    return Outcome.PASS if score >= threshold and not no_relevant_selected else Outcome.FAIL


def trial_of(result: ResultBase) -> int:
    return result.trial if isinstance(result, SemanticResult) else 0


@dataclass(frozen=True)
class TrialResults(Generic[R]):
    """A test's result rows, in trial order, judged against one pass threshold. What every report
    asks of each test, several times a run, is found once, when it is made."""

    rows: tuple[R, ...]
    threshold: int = DEFAULT_PASS_THRESHOLD
    scores: list[int] = field(init=False, repr=False, compare=False)
    score: float | None = field(init=False, repr=False, compare=False)
    # Conservative: a primary that goes missing in any trial can go missing in production.
    hard_fail: bool = field(init=False, repr=False, compare=False)
    # Conservative like `hard_fail`: a trial that selected nothing relevant fails the test.
    no_relevant_selected: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        outcomes = [r.outcome for r in self.rows if r.outcome is not None]
        scores = [o.score for o in outcomes]
        object.__setattr__(self, "scores", scores)
        # Whole points: their sum is exact, so one division rounds the mean as statistics.fmean does.
        object.__setattr__(self, "score", sum(scores) / len(scores) if scores else None)
        object.__setattr__(self, "hard_fail", any([o.hard_fail for o in outcomes]))
        object.__setattr__(self, "no_relevant_selected", any([o.no_relevant_selected for o in outcomes]))

    @property
    def first(self) -> R:
        return self.rows[0]

    @property
    def test_id(self) -> str:
        return self.first.test_id

    @property
    def trials(self) -> int:
        return len(self.rows)

    @property
    def status(self) -> ResultStatus:
        return ResultStatus.SCORED if self.scores else ResultStatus.ERRORED

    @property
    def outcome(self) -> Outcome:
        return outcome_of(self.score, self.threshold, self.no_relevant_selected)

    @property
    def trial_outcomes(self) -> list[Outcome]:
        return [outcome_of(r.score, self.threshold, r.no_relevant_selected) for r in self.rows]

    @property
    def flaky(self) -> bool:
        return len(set(self.trial_outcomes)) > 1

    @property
    def pass_all(self) -> bool:
        """pass^N: every trial passed."""
        return all(o is Outcome.PASS for o in self.trial_outcomes)

    @property
    def spread(self) -> tuple[int, int, float] | None:
        """(min, max, population standard deviation) of the scored trials."""
        scores = self.scores
        return (min(scores), max(scores), round(statistics.pstdev(scores), 2)) if scores else None


def by_test(rows: Sequence[R], threshold: int = DEFAULT_PASS_THRESHOLD) -> list[TrialResults[R]]:
    """Group result rows per test, tests in first-seen order, each test's rows in trial order."""
    grouped: dict[str, list[R]] = {}
    for row in rows:
        grouped.setdefault(row.test_id, []).append(row)
    return [TrialResults(tuple(sorted(group, key=trial_of)), threshold) for group in grouped.values()]

"""The 100-point score (specification §3): hard fail on a missing primary, per-item penalties.

Tests that state "any of" primaries hard-fail when none of them is selected. Graded tests start
from their graded points, ceil(25 + 75 × nDCG@10) (docs/scoring.md), the shortfall from 100 being
one more named penalty; one that selected nothing relevant is not a hard fail (a 0 would let a set
with a good nDCG@10 read POOR) but a failed test whatever its points. Scoring never looks at
*how* a mechanism decided: the evaluators hand it the missing, wrong and misordered items.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from enum import StrEnum

from pydantic import Field

from eval_pipeline.core.inputs.frozen import FrozenModel

PERFECT = 100
DEFAULT_PASS_THRESHOLD = 60
FAILING = "Failing"


class PenaltyKind(StrEnum):
    SECONDARY_MISSING = "secondary_missing"
    FALSE_POSITIVE = "false_positive"
    RANK_VIOLATION = "rank_violation"
    WRONG_HANDLER = "wrong_handler"
    GRADED_RELEVANCE = "graded_relevance"
    NO_RELEVANT_SELECTED = "no_relevant_selected"  # a graded shortfall that also fails the test


PENALTY_POINTS: dict[PenaltyKind, int] = {
    PenaltyKind.SECONDARY_MISSING: 10,
    PenaltyKind.FALSE_POSITIVE: 20,
    PenaltyKind.RANK_VIOLATION: 10,
    PenaltyKind.WRONG_HANDLER: 20,
}


class RankViolation(FrozenModel):
    expected_higher: str
    expected_lower: str
    actual_higher_rank: int
    actual_lower_rank: int


class Penalty(FrozenModel):
    """One deduction, named so reports and diffs can say exactly what cost points."""

    kind: PenaltyKind
    entity_id: str
    points: int = Field(le=0)
    rank: RankViolation | None = None
    detail: str | None = Field(default=None, description="What the entity id cannot say, e.g. an nDCG")

    @property
    def rule(self) -> str:
        """The scoring rule that cost the points, e.g. "false positive"."""
        if self.kind is PenaltyKind.NO_RELEVANT_SELECTED:
            return "no relevant entity selected"
        return self.kind.value.replace("_", " ")

    @property
    def text(self) -> str:
        what = self.detail or self.entity_id
        if self.rank is not None:
            r = self.rank
            what = (
                f"{r.expected_higher} (#{r.actual_higher_rank}) should rank above "
                f"{r.expected_lower} (#{r.actual_lower_rank})"
            )
        return f"{self.points} {self.rule}: {what}"


class ScoreOutcome(FrozenModel):
    score: int = Field(ge=0, le=100)
    label: str
    hard_fail: bool
    missing_primary: list[str] = Field(default_factory=list)
    missing_any: list[str] = Field(
        default_factory=list, description="The any-of primaries, when none of them was selected"
    )
    no_relevant_selected: bool = Field(
        default=False,
        description="A graded test that selected nothing with a gain above 0: failed whatever its score "
        "(a hard fail in results before 1.10)",
    )
    penalties: list[Penalty] = Field(default_factory=list)

    @property
    def relevance_fails(self) -> list[str]:
        """The any-of and graded hard fails ("none of any-of [a, b] selected", ...). Nothing relevant
        selected is named here only in a hard fail; otherwise its penalty names it."""
        reasons = [f"none of any-of [{', '.join(self.missing_any)}] selected"] if self.missing_any else []
        return reasons + (
            ["no relevant entity selected"] if self.no_relevant_selected and self.hard_fail else []
        )

    @property
    def hard_fail_reasons(self) -> list[str]:
        """Why the test hard-failed, one phrase per item ("missing primary x", ...); empty if it did not."""
        return [f"missing primary {e}" for e in self.missing_primary] + self.relevance_fails

    @property
    def hard_fail_text(self) -> str:
        """The same in one line: "missing a, b; none of any-of [c, d] selected"."""
        primaries = [f"missing {', '.join(self.missing_primary)}"] if self.missing_primary else []
        return "; ".join(primaries + self.relevance_fails)


# The score bands, best first: (lowest score, distribution bucket, label).
_BANDS = (
    (PERFECT, "100", "Perfect"),
    (90, "90-99", "Minor issue"),
    (80, "80-89", "Notable issues"),
    (70, "70-79", "Concerning"),
    (DEFAULT_PASS_THRESHOLD, "60-69", "Barely acceptable"),
    (1, "1-59", FAILING),
    (0, "0", "Hard fail"),
)
BUCKETS: tuple[str, ...] = tuple(bucket for _, bucket, _ in _BANDS)


def label_for(score: int) -> str:
    return next(label for floor, _, label in _BANDS if score >= floor)


def bucket_for(score: int) -> str:
    return next(bucket for floor, bucket, _ in _BANDS if score >= floor)


def distribution(scores: Iterable[int]) -> dict[str, int]:
    counts = Counter(bucket_for(score) for score in scores)
    return {bucket: counts[bucket] for bucket in BUCKETS}


def penalties_for(kind: PenaltyKind, entity_ids: Iterable[str]) -> list[Penalty]:
    return [Penalty(kind=kind, entity_id=e, points=-PENALTY_POINTS[kind]) for e in entity_ids]


def rank_penalties(violations: Iterable[RankViolation]) -> list[Penalty]:
    points = -PENALTY_POINTS[PenaltyKind.RANK_VIOLATION]
    return [
        Penalty(kind=PenaltyKind.RANK_VIOLATION, entity_id=v.expected_higher, points=points, rank=v)
        for v in violations
    ]


# Graded points are GRADED_BASE + GRADED_SLOPE × nDCG@10: the line through (0.6, 70) and (1, 100), the
# least a query may score for a bank whose mean nDCG@10 is 0.6 never to average under 70 (POOR).
GRADED_BASE, GRADED_SLOPE = 25, 75
# nDCG from the library can sit a float's hair above a value that is exactly on a whole point.
_FLOAT_HAIR = 1e-9


def graded_points(ndcg: float) -> int:
    """A graded test's points before penalties: ceil(25 + 75 × nDCG@10), 25 to 100, rounded up so
    a set at exactly nDCG@10 0.6 averages 70, not a rounding below it (docs/scoring.md: the
    arithmetic and the worked examples)."""
    exact = GRADED_BASE + GRADED_SLOPE * min(max(ndcg, 0.0), 1.0)
    return min(PERFECT, math.ceil(exact - _FLOAT_HAIR))


def score(
    missing_primary: Sequence[str],
    penalties: Sequence[Penalty],
    *,
    missing_any: Sequence[str] = (),
    no_relevant_selected: bool = False,
) -> ScoreOutcome:
    """Apply the rules: any missing primary or an any-of set with nothing selected is a hard fail
    (0); else 100 minus penalties, ≥ 0. A graded test with nothing relevant selected keeps its
    points (its shortfall is a penalty) and is labelled failing: it fails whatever it scores."""
    hard = bool(missing_primary or missing_any)
    value = 0 if hard else max(0, PERFECT + sum(p.points for p in penalties))
    return ScoreOutcome(
        score=value,
        label=FAILING if no_relevant_selected and value > 0 else label_for(value),
        hard_fail=hard,
        missing_primary=list(missing_primary),
        missing_any=list(missing_any),
        no_relevant_selected=no_relevant_selected,
        penalties=[] if hard else list(penalties),
    )

"""The 100-point score (specification §3): hard fail on a missing primary, per-item penalties.

Tests that state "any of" primaries hard-fail when none of them is selected; graded tests
hard-fail when nothing with a gain is selected and otherwise start from their graded points
(docs/scoring.md), the shortfall from 100 being one more named penalty.

Scoring never looks at *how* a mechanism decided; the evaluators hand it the missing,
wrong and misordered items and it applies the published rules.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

PERFECT = 100
DEFAULT_PASS_THRESHOLD = 60


class PenaltyKind(StrEnum):
    SECONDARY_MISSING = "secondary_missing"
    FALSE_POSITIVE = "false_positive"
    RANK_VIOLATION = "rank_violation"
    WRONG_HANDLER = "wrong_handler"
    GRADED_RELEVANCE = "graded_relevance"


PENALTY_POINTS: dict[PenaltyKind, int] = {
    PenaltyKind.SECONDARY_MISSING: 10,
    PenaltyKind.FALSE_POSITIVE: 20,
    PenaltyKind.RANK_VIOLATION: 10,
    PenaltyKind.WRONG_HANDLER: 20,
}

_DESCRIPTIONS: dict[PenaltyKind, str] = {
    PenaltyKind.SECONDARY_MISSING: "secondary missing",
    PenaltyKind.FALSE_POSITIVE: "false positive",
    PenaltyKind.RANK_VIOLATION: "rank violation",
    PenaltyKind.WRONG_HANDLER: "wrong handler",
    PenaltyKind.GRADED_RELEVANCE: "graded relevance",
}


class RankViolation(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    expected_higher: str
    expected_lower: str
    actual_higher_rank: int
    actual_lower_rank: int


class Penalty(BaseModel):
    """One deduction, named so reports and diffs can say exactly what cost points."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: PenaltyKind
    entity_id: str
    points: int = Field(le=0)
    rank: RankViolation | None = None
    detail: str | None = Field(default=None, description="What the entity id cannot say, e.g. an nDCG")

    @property
    def rule(self) -> str:
        """The scoring rule that cost the points, e.g. "false positive"."""
        return _DESCRIPTIONS[self.kind]

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


class ScoreOutcome(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    score: int = Field(ge=0, le=100)
    label: str
    hard_fail: bool
    missing_primary: list[str] = Field(default_factory=list)
    missing_any: list[str] = Field(
        default_factory=list, description="The any-of primaries, when none of them was selected"
    )
    no_relevant_selected: bool = Field(
        default=False, description="A graded test that selected nothing with a gain above 0"
    )
    penalties: list[Penalty] = Field(default_factory=list)

    @property
    def relevance_fails(self) -> list[str]:
        """The any-of and graded hard fails ("none of any-of [a, b] selected", ...)."""
        reasons = [f"none of any-of [{', '.join(self.missing_any)}] selected"] if self.missing_any else []
        return reasons + (["no relevant entity selected"] if self.no_relevant_selected else [])

    @property
    def hard_fail_reasons(self) -> list[str]:
        """Why the test hard-failed, one phrase per item ("missing primary x", ...); empty if it did not."""
        return [f"missing primary {e}" for e in self.missing_primary] + self.relevance_fails

    @property
    def hard_fail_text(self) -> str:
        """The same in one line: "missing a, b; none of any-of [c, d] selected"."""
        primaries = [f"missing {', '.join(self.missing_primary)}"] if self.missing_primary else []
        return "; ".join(primaries + self.relevance_fails)


def label_for(score: int) -> str:
    if score == PERFECT:
        return "Perfect"
    for floor, label in ((90, "Minor issue"), (80, "Notable issues"), (70, "Concerning")):
        if score >= floor:
            return label
    if score >= DEFAULT_PASS_THRESHOLD:
        return "Barely acceptable"
    return "Failing" if score > 0 else "Hard fail"


BUCKETS: tuple[str, ...] = ("100", "90-99", "80-89", "70-79", "60-69", "1-59", "0")


def bucket_for(score: int) -> str:
    if score == PERFECT:
        return "100"
    if score == 0:
        return "0"
    if score < DEFAULT_PASS_THRESHOLD:
        return "1-59"
    low = (score // 10) * 10
    return f"{low}-{low + 9}"


def distribution(scores: Iterable[int]) -> dict[str, int]:
    counts = dict.fromkeys(BUCKETS, 0)
    for score in scores:
        counts[bucket_for(score)] += 1
    return counts


def penalties_for(kind: PenaltyKind, entity_ids: Iterable[str]) -> list[Penalty]:
    return [Penalty(kind=kind, entity_id=e, points=-PENALTY_POINTS[kind]) for e in entity_ids]


def rank_penalties(violations: Iterable[RankViolation]) -> list[Penalty]:
    points = -PENALTY_POINTS[PenaltyKind.RANK_VIOLATION]
    return [
        Penalty(kind=PenaltyKind.RANK_VIOLATION, entity_id=v.expected_higher, points=points, rank=v)
        for v in violations
    ]


def graded_points(ndcg: float) -> int:
    """A graded test's points before penalties: 100 × √nDCG, rounded.

    The square root, because nDCG against many judged passages seldom nears 1 even for a good
    ranking: √ puts nDCG 0.49 at 70 and 0.81 at 90 (docs/scoring.md has the worked examples).
    """
    return round(PERFECT * math.sqrt(min(max(ndcg, 0.0), 1.0)))


def graded_penalty(points: int, detail: str) -> Penalty:
    """The graded test's shortfall from 100 (its graded points are 100 plus this)."""
    return Penalty(kind=PenaltyKind.GRADED_RELEVANCE, entity_id="", points=points - PERFECT, detail=detail)


def score(
    missing_primary: Sequence[str],
    penalties: Sequence[Penalty],
    *,
    missing_any: Sequence[str] = (),
    no_relevant_selected: bool = False,
) -> ScoreOutcome:
    """Apply the rules: any missing primary, an any-of set with nothing selected, or a graded test
    with nothing relevant selected is a hard fail (0); else 100 minus penalties, ≥ 0."""
    if missing_primary or missing_any or no_relevant_selected:
        return ScoreOutcome(
            score=0,
            label=label_for(0),
            hard_fail=True,
            missing_primary=list(missing_primary),
            missing_any=list(missing_any),
            no_relevant_selected=no_relevant_selected,
        )
    value = max(0, PERFECT + sum(p.points for p in penalties))
    return ScoreOutcome(score=value, label=label_for(value), hard_fail=False, penalties=list(penalties))


def all_or_nothing(missing: Sequence[str]) -> ScoreOutcome:
    """Always-loaded entities: 100 when every expected entity loads, otherwise a hard fail."""
    return score(missing, [])

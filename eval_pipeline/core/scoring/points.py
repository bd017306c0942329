"""The 100-point score (specification §3): hard fail on a missing primary, per-item penalties.

Scoring never looks at *how* a mechanism decided; the evaluators hand it the missing,
wrong and misordered items and it applies the published rules.
"""

from __future__ import annotations

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

    @property
    def rule(self) -> str:
        """The scoring rule that cost the points, e.g. "false positive"."""
        return _DESCRIPTIONS[self.kind]

    @property
    def text(self) -> str:
        what = self.entity_id
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
    penalties: list[Penalty] = Field(default_factory=list)


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


def score(missing_primary: Sequence[str], penalties: Sequence[Penalty]) -> ScoreOutcome:
    """Apply the rules: any missing primary is a hard fail (0); else 100 minus penalties, ≥ 0."""
    if missing_primary:
        return ScoreOutcome(
            score=0, label=label_for(0), hard_fail=True, missing_primary=list(missing_primary)
        )
    value = max(0, PERFECT + sum(p.points for p in penalties))
    return ScoreOutcome(score=value, label=label_for(value), hard_fail=False, penalties=list(penalties))


def all_or_nothing(missing: Sequence[str]) -> ScoreOutcome:
    """Always-loaded entities: 100 when every expected entity loads, otherwise a hard fail."""
    return score(missing, [])

"""Aggregate per-test results into bank summaries, breakdowns, a combined score and health.

Errored tests are counted apart and left out of every average (an unknown outcome is neither 0
nor 100), never out of the verdict: a bank that ran keeps its weight, and one with under half of
its tests scored makes the combined score and health UNKNOWN, so an outage never scores better
than a working system. Hard fails are counted per test, truly. Scores stay unrounded: health and
gates judge the exact value; only displays round.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any, TypeVar

from pydantic import Field

from eval_pipeline.core.expectations.resolution import source_summary
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.mechanisms.retrieval import Usage
from eval_pipeline.core.scoring.points import DEFAULT_PASS_THRESHOLD, distribution
from eval_pipeline.core.scoring.registry import MECHANISMS, PATTERN, SEMANTIC, STATE, BankResults
from eval_pipeline.core.scoring.results import (
    PatternResult,
    ResultBase,
    ResultStatus,
    SemanticResult,
    StateResult,
)
from eval_pipeline.core.scoring.trials import Outcome, TrialResults, by_test, outcome_of

T = TypeVar("T")

# A bank under this share of scored tests says too little to be judged: its verdict is unknown.
MIN_BANK_COVERAGE = 0.5

# What produced a bank when the model does not assign it to the team's system: the built-in mechanism.
REFERENCE = "reference"


class Health(StrEnum):
    CRITICAL = "CRITICAL"
    EXCELLENT = "EXCELLENT"
    GOOD = "GOOD"
    FAIR = "FAIR"
    POOR = "POOR"
    UNKNOWN = "UNKNOWN"  # a bank that ran could not be evaluated (too few scored tests), or none ran


# The combined score each band starts at (POOR is everything under FAIR): what health judges, and
# what the HTML report's trend charts shade.
HEALTH_FLOORS: dict[Health, float] = {Health.EXCELLENT: 90.0, Health.GOOD: 80.0, Health.FAIR: 70.0}


class GroupScore(FrozenModel):
    tests: int
    scored: int
    errored: int
    average: float | None
    hard_fails: int


class BankSummary(GroupScore):
    mechanism: Mechanism
    passed: int
    distribution: dict[str, int]

    @property
    def evaluable(self) -> bool:
        """Enough of the bank was scored to judge it (an empty bank has nothing to judge)."""
        return self.tests == 0 or self.scored >= max(1, math.ceil(self.tests * MIN_BANK_COVERAGE))


class PatternTypeScore(GroupScore):
    critical_failures: int


class HandlerScore(FrozenModel):
    """A handler's own record: tests that expect it and tests that must not fire it."""

    handler: str
    expected_in: int
    fired_when_expected: int
    forbidden_in: int
    fired_when_forbidden: int
    average_of_involved_tests: float | None


class CriticalFailure(FrozenModel):
    test_id: str
    reason: str
    prompt: str


class Aggregate(FrozenModel):
    banks: dict[Mechanism, BankSummary]
    implementations: dict[Mechanism, str] = Field(
        default_factory=dict,
        description="What produced each bank: 'reference' (built in) or the team's system ('http', 'python')",
    )
    weights: dict[Mechanism, float] = Field(description="Weights renormalised over banks run")
    combined_score: float | None = Field(description="Unrounded; None when a bank is unevaluable")
    unevaluable_banks: list[Mechanism] = Field(
        default_factory=list,
        description="Banks that ran with under half (or none) of their tests scored",
    )
    health: Health
    total_tests: int
    hard_fail_count: int
    errored_count: int
    critical_failures: list[CriticalFailure]
    topic_scores: dict[str, GroupScore]
    category_scores: dict[str, GroupScore]
    pattern_type_scores: dict[str, PatternTypeScore]
    handler_scores: dict[str, HandlerScore]
    expectation_sources: dict[str, int]
    expectation_conflicts: int
    usage: Usage
    cost_usd: float

    def unevaluable_reasons(self) -> list[str]:
        """One line per bank that ran but could not be judged, e.g. every test errored."""
        return [
            f"{m.value}: {b.scored} of {b.tests} tests scored ({b.errored} errored)"
            for m, b in self.banks.items()
            if m in self.unevaluable_banks
        ]


def describe_implementations(implementations: Mapping[Mechanism, str]) -> str:
    """ "semantic reference, state http, …": what produced each bank, in bank order."""
    return ", ".join(f"{m.value} {implementations[m]}" for m in Mechanism if m in implementations)


# One test's outcome: a result, or a test's trials taken together (`core.trials`).
Scored = ResultBase | TrialResults[Any]


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _whole_points(score: float) -> int:
    """A trial mean such as 93.3 buckets with 93; a non-zero mean never lands in the 0 bucket."""
    return max(math.floor(score), 1) if score > 0 else 0


def group_score(results: Sequence[Scored]) -> GroupScore:
    scores = [r.score for r in results if r.score is not None]
    return GroupScore(
        tests=len(results),
        scored=len(scores),
        errored=sum(r.status is ResultStatus.ERRORED for r in results),
        average=_mean(scores),
        hard_fails=sum(r.hard_fail for r in results),
    )


def bank_summary(
    mechanism: Mechanism, results: Sequence[Scored], threshold: int = DEFAULT_PASS_THRESHOLD
) -> BankSummary:
    return BankSummary(
        **group_score(results).model_dump(),
        mechanism=mechanism,
        passed=sum(outcome_of(r.score, threshold, r.no_relevant_selected) is Outcome.PASS for r in results),
        distribution=distribution(_whole_points(r.score) for r in results if r.score is not None),
    )


def grouped(results: Iterable[T], keys: Callable[[T], Iterable[str]]) -> dict[str, list[T]]:
    out: dict[str, list[T]] = {}
    for result in results:
        for key in keys(result):
            out.setdefault(key, []).append(result)
    return dict(sorted(out.items()))


def pattern_type_scores(results: Sequence[PatternResult]) -> dict[str, PatternTypeScore]:
    return {
        kind: PatternTypeScore(
            **group_score(group).model_dump(),
            critical_failures=sum(r.critical_failure for r in group),
        )
        for kind, group in grouped(results, lambda r: [r.pattern_type.value]).items()
    }


def handler_scores(results: Sequence[StateResult]) -> dict[str, HandlerScore]:
    handlers = sorted({h for r in results for h in (*r.expected_handlers, *r.not_expected_handlers)})
    out: dict[str, HandlerScore] = {}
    for h in handlers:
        expecting = [r for r in results if h in r.expected_handlers]
        forbidding = [r for r in results if h in r.not_expected_handlers]
        involved = [r.score for r in results if r in expecting or r in forbidding]
        out[h] = HandlerScore(
            handler=h,
            expected_in=len(expecting),
            fired_when_expected=sum(h in r.triggered_handlers for r in expecting),
            forbidden_in=len(forbidding),
            fired_when_forbidden=sum(h in r.triggered_handlers for r in forbidding),
            average_of_involved_tests=_mean([s for s in involved if s is not None]),
        )
    return out


def combined_score(
    banks: Mapping[Mechanism, BankSummary],
) -> tuple[float | None, dict[Mechanism, float]]:
    """Weighted mean of bank averages, renormalised over the banks that ran with tests; unknown
    (None) when any of those banks is unevaluable: leaving it out would reweight the run onto the
    banks that happened to work."""
    present = {m: MECHANISMS[m].weight for m, b in banks.items() if b.tests}
    total = sum(present.values())
    if not total:
        return None, {}
    exact = {m: w / total for m, w in present.items()}
    shown = {m: round(w, 4) for m, w in exact.items()}
    if any(not banks[m].evaluable or banks[m].average is None for m in exact):
        return None, shown
    return sum((banks[m].average or 0.0) * w for m, w in exact.items()), shown


def health_status(combined: float | None, critical: int, hard_fails: int, errored: int) -> Health:
    """Specification rule on the unrounded score. A known critical failure stays CRITICAL even
    when another bank is unknown; an errored test keeps a run out of EXCELLENT."""
    if critical:
        return Health.CRITICAL
    if combined is None:
        return Health.UNKNOWN
    if combined >= HEALTH_FLOORS[Health.EXCELLENT] and hard_fails == 0 and errored == 0:
        return Health.EXCELLENT
    if combined >= HEALTH_FLOORS[Health.GOOD]:
        return Health.GOOD
    return Health.FAIR if combined >= HEALTH_FLOORS[Health.FAIR] else Health.POOR


def aggregate(
    results: BankResults,
    threshold: int = DEFAULT_PASS_THRESHOLD,
    implementations: Mapping[Mechanism, str] | None = None,
    semantic_tests: Sequence[TrialResults[SemanticResult]] | None = None,
) -> Aggregate:
    """Aggregate the banks that ran (the keys of `results`; an empty list = ran with no tests), a
    semantic test run for several trials counting once, with the mean of its trials.
    `implementations` says what produced each bank (default: the built-in reference);
    `semantic_tests`: the semantic results already grouped by test, when the caller has done it."""
    semantic, state, pattern = SEMANTIC.rows(results), STATE.rows(results), PATTERN.rows(results)
    sem: Sequence[TrialResults[SemanticResult]] = []
    if Mechanism.SEMANTIC in results:
        sem = by_test(semantic, threshold) if semantic_tests is None else semantic_tests
    by_bank: dict[Mechanism, Sequence[Scored]] = {
        m: sem if m is Mechanism.SEMANTIC else results[m] for m in Mechanism if m in results
    }
    banks = {m: bank_summary(m, rs, threshold) for m, rs in by_bank.items()}
    combined, weights = combined_score(banks)
    crit = [
        CriticalFailure(test_id=r.test_id, reason=r.critical_reason or "", prompt=r.prompt)
        for r in pattern
        if r.critical_failure
    ]
    hard = sum(b.hard_fails for b in banks.values())
    errored = sum(b.errored for b in banks.values())
    made_by = implementations or {}
    return Aggregate(
        banks=banks,
        implementations={m: made_by.get(m, REFERENCE) for m in banks},
        weights=weights,
        combined_score=combined,
        unevaluable_banks=[m for m, b in banks.items() if not b.evaluable],
        health=health_status(combined, len(crit), hard, errored),
        total_tests=sum(b.tests for b in banks.values()),
        hard_fail_count=hard,
        errored_count=errored,
        critical_failures=crit,
        topic_scores={k: group_score(v) for k, v in grouped(sem, lambda t: t.first.topics).items()},
        category_scores={k: group_score(v) for k, v in grouped(sem, lambda t: [t.first.category]).items()},
        pattern_type_scores=pattern_type_scores(pattern),
        handler_scores=handler_scores(state),
        # One count per semantic test, whatever its number of trials.
        expectation_sources=source_summary({r.test_id: r.expectation_source for r in semantic}.values())
        if Mechanism.SEMANTIC in results
        else {},
        expectation_conflicts=sum(t.first.expectation_conflict for t in sem),
        usage=Usage.total(r.usage for r in semantic),
        cost_usd=round(sum(r.cost_usd for r in semantic), 6),
    )

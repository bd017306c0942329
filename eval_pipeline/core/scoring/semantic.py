"""How a semantic test scores: an ordered selection judged against resolved expectations."""

from __future__ import annotations

from collections.abc import Sequence

from eval_pipeline.core.expectations.resolution import ResolvedExpectation
from eval_pipeline.core.inputs.banks import Expectations, RankCheck, SemanticTest
from eval_pipeline.core.mechanisms.retrieval import SemanticRetrieval, final_ranking
from eval_pipeline.core.scoring.metrics import GRADED_CUTOFF, graded_ndcg
from eval_pipeline.core.scoring.points import (
    PERFECT,
    Penalty,
    PenaltyKind,
    RankViolation,
    ScoreOutcome,
    graded_points,
    penalties_for,
    rank_penalties,
    score,
)
from eval_pipeline.core.scoring.results import ResultStatus, SemanticEvaluation, SemanticResult, result_of


def rank_violations(selected: Sequence[str], checks: Sequence[RankCheck]) -> list[RankViolation]:
    """A check counts only when both entities were selected."""
    out: list[RankViolation] = []
    for check in checks:
        if check.higher in selected and check.lower in selected:
            hi, lo = selected.index(check.higher), selected.index(check.lower)
            if hi > lo:
                out.append(
                    RankViolation(
                        expected_higher=check.higher,
                        expected_lower=check.lower,
                        actual_higher_rank=hi + 1,
                        actual_lower_rank=lo + 1,
                    )
                )
    return out


def evaluate_selection(
    selected: Sequence[str], exp: Expectations, ranking: Sequence[str] | None = None
) -> SemanticEvaluation:
    """`ranking` is the test's `final_ranking` (the selection, then the other candidates), which a
    graded test's nDCG@10 is measured on; without it, the selection alone."""
    missing = [e for e in exp.expected_primary if e not in selected]
    missing_any = [] if any(e in selected for e in exp.expected_any) else list(exp.expected_any)
    no_relevant = exp.graded and not any(exp.relevant.get(e, 0) > 0 for e in selected)
    return SemanticEvaluation(
        primary_pass=not (missing or missing_any or no_relevant),
        missing_primary=missing,
        missing_any=missing_any,
        no_relevant_selected=no_relevant,
        graded_ndcg=graded_ndcg(selected if ranking is None else ranking, exp) if exp.graded else None,
        secondary_missing=[e for e in exp.expected_secondary if e not in selected],
        false_positives=[e for e in exp.not_expected if e in selected],
        rank_violations=rank_violations(selected, exp.rank_check),
    )


def _graded(ev: SemanticEvaluation) -> list[Penalty]:
    """A graded test's shortfall from 100 (its graded points are 100 plus this), named "no relevant
    entity selected" and listed even at 0 points when nothing relevant was selected: it fails the test."""
    if ev.graded_ndcg is None:
        return []
    points = graded_points(ev.graded_ndcg)
    if points == PERFECT and not ev.no_relevant_selected:
        return []
    kind = PenaltyKind.NO_RELEVANT_SELECTED if ev.no_relevant_selected else PenaltyKind.GRADED_RELEVANCE
    detail = f"nDCG@{GRADED_CUTOFF} {ev.graded_ndcg:.2f}"
    return [Penalty(kind=kind, entity_id="", points=points - PERFECT, detail=detail)]


def evaluate_semantic_test(
    test: SemanticTest, resolved: ResolvedExpectation, retrieval: SemanticRetrieval
) -> SemanticResult:
    """Errored retrievals become errored results (reason kept, no score); the rest are scored."""
    ev: SemanticEvaluation | None = None
    outcome: ScoreOutcome | None = None
    if retrieval.status == "ok":
        exp = resolved.expectations
        # Only a graded test's nDCG@10 reads the whole ranking.
        ranking = final_ranking(retrieval.selections, retrieval.candidates) if exp.graded else None
        ev = evaluate_selection(retrieval.selected_ids, exp, ranking)
        outcome = score(
            ev.missing_primary,
            _graded(ev)
            + penalties_for(PenaltyKind.SECONDARY_MISSING, ev.secondary_missing)
            + penalties_for(PenaltyKind.FALSE_POSITIVE, ev.false_positives)
            + rank_penalties(ev.rank_violations),
            missing_any=ev.missing_any,
            no_relevant_selected=ev.no_relevant_selected,
        )
    return result_of(
        SemanticResult,
        test,
        status=ResultStatus.SCORED if outcome is not None else ResultStatus.ERRORED,
        error=retrieval.error if outcome is None else None,
        outcome=outcome,
        evaluation=ev,
        model=retrieval.model,
        trial=retrieval.trial,
        expectations=resolved.expectations,
        expectation_source=resolved.source,
        expectation_conflict=resolved.conflict is not None,
        candidates=retrieval.candidates,
        selections=retrieval.selections,
        usage=retrieval.usage,
        cost_usd=retrieval.cost_usd,
        latency_ms=retrieval.latency_ms,
    )

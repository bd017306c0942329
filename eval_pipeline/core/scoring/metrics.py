"""Retrieval metrics for semantic tests, and the pipeline stage each semantic hard fail arose in.

The metrics come from ir-measures (pytrec_eval underneath) rather than hand-rolled formulas:
- nDCG@6 of the final selection, primary entities with gain 2 and secondary ones with gain 1;
- recall@6 of primary + secondary entities in the final selection;
- MRR of the first primary entity (reciprocal rank over primaries only);
- candidate-stage recall@15: primary + secondary entities among the embedding stage's top 15.
Errored trials have no retrieval to measure; they are attributed to the "error" stage instead.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from enum import StrEnum

import ir_measures
from ir_measures import Measure, Qrel, ScoredDoc
from pydantic import BaseModel, ConfigDict

from eval_pipeline.core.inputs.banks import Expectations
from eval_pipeline.core.inputs.contract import CANDIDATE_K, SELECTION_K
from eval_pipeline.core.scoring.results import SemanticResult, TestStatus

PRIMARY_GAIN, SECONDARY_GAIN = 2, 1
NDCG = ir_measures.nDCG @ SELECTION_K
RECALL = ir_measures.R(rel=SECONDARY_GAIN) @ SELECTION_K
MRR_PRIMARY = ir_measures.RR(rel=PRIMARY_GAIN)
CANDIDATE_RECALL = ir_measures.R(rel=SECONDARY_GAIN) @ CANDIDATE_K


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RetrievalMetrics(_Frozen):
    ndcg_6: float
    recall_6: float
    mrr_primary: float
    candidate_recall_15: float


class TestMetrics(RetrievalMetrics):
    __test__ = False  # not a pytest test class despite the name

    test_id: str
    trial: int


class Stage(StrEnum):
    EMBEDDING = "embedding"  # a missing primary never reached the top 15 candidates
    RERANKER = "reranker"  # every missing primary was a candidate but was not selected
    ERROR = "error"  # the retrieval errored: there is nothing to attribute


class MissedPrimary(_Frozen):
    entity_id: str
    candidate_rank: int | None  # 1-based place among the top 15, None when absent


class StageAttribution(_Frozen):
    test_id: str
    trial: int
    stage: Stage
    missed: list[MissedPrimary]
    error: str | None = None

    @property
    def detail(self) -> str:
        """E.g. "some_entity was candidate #4", "x not in the top 15", or the error's reason."""
        if self.stage is Stage.ERROR:
            return self.error or "no reason given"
        return ", ".join(
            f"{m.entity_id} was candidate #{m.candidate_rank}"
            if m.candidate_rank is not None
            else f"{m.entity_id} not in the top {CANDIDATE_K}"
            for m in self.missed
        )

    @property
    def text(self) -> str:
        return f"{self.stage.value}: {self.detail}"


def _query_id(r: SemanticResult) -> str:
    return f"{r.test_id}#{r.trial}"


def qrels(exp: Expectations, query_id: str) -> list[Qrel]:
    gains = dict.fromkeys(exp.expected_secondary, SECONDARY_GAIN)
    gains.update(dict.fromkeys(exp.expected_primary, PRIMARY_GAIN))  # primary wins if listed twice
    return [Qrel(query_id, entity, gain) for entity, gain in gains.items()]


def ranked_run(entity_ids: Sequence[str], query_id: str) -> list[ScoredDoc]:
    # Scores that reproduce the stored order exactly: no tie is left to the library to break.
    return [ScoredDoc(query_id, entity, float(-place)) for place, entity in enumerate(entity_ids)]


def _values(
    measures: Sequence[Measure], qrel: list[Qrel], run: list[ScoredDoc]
) -> dict[tuple[str, Measure], float]:
    return {(m.query_id, m.measure): float(m.value) for m in ir_measures.iter_calc(list(measures), qrel, run)}


def all_metrics(results: Sequence[SemanticResult]) -> list[TestMetrics]:
    """Metrics of every scored trial (errored ones have no retrieval to measure).

    One evaluator per stage for the whole run: building one per test cost more than the measuring.
    A query with nothing ranked is absent from the library's answer and measures 0.
    """
    scored = [r for r in results if r.status is TestStatus.SCORED]
    qrel = [q for r in scored for q in qrels(r.expectations, _query_id(r))]
    final_run: list[ScoredDoc] = []
    first_run: list[ScoredDoc] = []
    for r in scored:
        selected = sorted(r.selections, key=lambda s: s.rank)
        final_run += ranked_run([s.entity_id for s in selected], _query_id(r))
        first_run += ranked_run([c.entity_id for c in r.candidates], _query_id(r))
    final = _values((NDCG, RECALL, MRR_PRIMARY), qrel, final_run) if scored else {}
    first = _values((CANDIDATE_RECALL,), qrel, first_run) if scored else {}
    return [
        TestMetrics(
            test_id=r.test_id,
            trial=r.trial,
            ndcg_6=final.get((_query_id(r), NDCG), 0.0),
            recall_6=final.get((_query_id(r), RECALL), 0.0),
            mrr_primary=final.get((_query_id(r), MRR_PRIMARY), 0.0),
            candidate_recall_15=first.get((_query_id(r), CANDIDATE_RECALL), 0.0),
        )
        for r in scored
    ]


def mean_metrics(metrics: Sequence[TestMetrics]) -> RetrievalMetrics | None:
    """Means over tests, each test once (its trials averaged first)."""
    per_test: dict[str, list[TestMetrics]] = {}
    for m in metrics:
        per_test.setdefault(m.test_id, []).append(m)
    if not per_test:
        return None
    fields = list(RetrievalMetrics.model_fields)
    test_means = [
        {f: statistics.fmean(getattr(m, f) for m in trials) for f in fields} for trials in per_test.values()
    ]
    return RetrievalMetrics(**{f: round(statistics.fmean(t[f] for t in test_means), 4) for f in fields})


def attribute(r: SemanticResult) -> StageAttribution | None:
    """Where a hard fail (or an error) arose; None for a trial that is neither."""
    if r.status is TestStatus.ERRORED:
        return StageAttribution(test_id=r.test_id, trial=r.trial, stage=Stage.ERROR, missed=[], error=r.error)
    if not r.hard_fail or r.outcome is None:
        return None
    places = {c.entity_id: i for i, c in enumerate(r.candidates, start=1)}
    missed = [MissedPrimary(entity_id=e, candidate_rank=places.get(e)) for e in r.outcome.missing_primary]
    # The reranker cannot pick what the embedding stage never offered it.
    stage = Stage.EMBEDDING if any(m.candidate_rank is None for m in missed) else Stage.RERANKER
    return StageAttribution(test_id=r.test_id, trial=r.trial, stage=stage, missed=missed)


def attributions(results: Sequence[SemanticResult]) -> list[StageAttribution]:
    return [a for a in map(attribute, results) if a is not None]

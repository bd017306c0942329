"""Retrieval metrics for semantic tests, and the pipeline stage each semantic hard fail arose in.

The metrics come from ir-measures (pytrec_eval underneath) rather than hand-rolled formulas:
- nDCG@6 of the final selection, primary entities with gain 2 and secondary ones with gain 1;
- recall@6 of primary + secondary entities in the final selection;
- MRR of the first primary entity (reciprocal rank over primaries only);
- candidate-stage recall@15: primary + secondary entities among the embedding stage's top 15.
Every metric reads the test's qrels from `judgments` (graded gains as given, primaries 2,
secondaries 1), the one mapping TREC qrels exports use too. Beside them, `ir_metrics` gives the
field's standard cutoffs (nDCG@10, R@100, MRR@10) on each test's `final_ranking`.
Errored trials have no retrieval to measure; they are attributed to the "error" stage instead.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from enum import StrEnum

import ir_measures
from ir_measures import Measure
from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.core.inputs.banks import Expectations
from eval_pipeline.core.inputs.contract import CANDIDATE_K, SELECTION_K
from eval_pipeline.core.mechanisms.retrieval import Selection, final_ranking
from eval_pipeline.core.scoring.results import SemanticResult, TestStatus

PRIMARY_GAIN, SECONDARY_GAIN = 2, 1
NDCG = ir_measures.nDCG @ SELECTION_K
RECALL = ir_measures.R(rel=SECONDARY_GAIN) @ SELECTION_K
MRR_PRIMARY = ir_measures.RR(rel=PRIMARY_GAIN)
CANDIDATE_RECALL = ir_measures.R(rel=SECONDARY_GAIN) @ CANDIDATE_K
# The field's standard cutoffs, by the names results.json gives them.
IR_MEASURES: dict[str, Measure] = {
    "ndcg@10": ir_measures.nDCG @ 10,
    "recall@100": ir_measures.R @ 100,
    "mrr@10": ir_measures.RR @ 10,
}
GRADED_CUTOFF = 10
GRADED_NDCG = IR_MEASURES["ndcg@10"]  # a graded test's points come from the standard nDCG@10


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


class BestRelevant(_Frozen):
    """A graded test's best judged entity among the candidates, when it selected none."""

    entity_id: str
    gain: int
    candidate_rank: int


class StageAttribution(_Frozen):
    test_id: str
    trial: int
    stage: Stage
    missed: list[MissedPrimary]
    error: str | None = None
    any_of: list[MissedPrimary] = Field(default_factory=list, description="Any-of primaries, none selected")
    no_relevant_selected: bool = False
    best_relevant: BestRelevant | None = None
    depth: int = Field(default=CANDIDATE_K, description="How many candidates the embedding stage kept")

    def _place(self, m: MissedPrimary) -> str:
        if m.candidate_rank is not None:
            return f"{m.entity_id} was candidate #{m.candidate_rank}"
        return f"{m.entity_id} not in the top {self.depth}"

    @property
    def detail(self) -> str:
        """E.g. "some_entity was candidate #4", "x not in the top 15", or the error's reason."""
        if self.stage is Stage.ERROR:
            return self.error or "no reason given"
        parts = [self._place(m) for m in self.missed]
        if self.any_of:
            offered = [self._place(m) for m in self.any_of if m.candidate_rank is not None]
            where = ", ".join(offered) or f"none in the top {self.depth}"
            parts.append(f"none of any-of [{', '.join(m.entity_id for m in self.any_of)}] selected ({where})")
        if self.no_relevant_selected:
            best = self.best_relevant
            where = (
                f"best gain {best.gain} at candidate #{best.candidate_rank}"
                if best is not None
                else f"none in the top {self.depth}"
            )
            parts.append(f"no relevant entity selected ({where})")
        return ", ".join(parts)

    @property
    def text(self) -> str:
        return f"{self.stage.value}: {self.detail}"


def _rank(s: Selection) -> int:
    return s.rank


def _query_id(r: SemanticResult) -> str:
    return f"{r.test_id}#{r.trial}"


def judgments(exp: Expectations) -> dict[str, int]:
    """A semantic test's qrels as entity -> gain: every metric here and every TREC qrels file.

    Graded gains as given (0 = judged not relevant); exact and any-of primaries 2; secondaries 1.
    Validation keeps an entity to one role; were one listed twice, a stated gain wins, then a primary.
    """
    gains = dict.fromkeys(exp.expected_secondary, SECONDARY_GAIN)
    gains.update(dict.fromkeys(exp.expected_any, PRIMARY_GAIN))
    gains.update(dict.fromkeys(exp.expected_primary, PRIMARY_GAIN))
    gains.update(exp.relevant)
    return gains


def is_judged(exp: Expectations) -> bool:
    """Whether a test names anything relevant (gain > 0): the queries standard metrics average."""
    return any(g > 0 for g in judgments(exp).values())


# ir_measures' own dict-of-dict forms (query id -> entity -> gain or score): handing it these,
# rather than a named tuple a judgment and a ranked entity that it converts back into them, took
# a third off the metrics of a warm run.
Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]


def qrels_of(judged: Iterable[tuple[str, Expectations]]) -> Qrels:
    """The qrels of (query id, expectations) pairs; a query that judges nothing has none."""
    out: Qrels = {}
    for query_id, exp in judged:
        gains = judgments(exp)
        if gains:
            out[query_id] = gains
    return out


def run_of(rankings: Iterable[tuple[str, Sequence[str]]]) -> Run:
    """The run of (query id, ranked entity ids) pairs; a query that ranked nothing is absent.
    Scores reproduce the stored order exactly: no tie is left to the library to break."""
    return {
        query_id: {entity: float(-place) for place, entity in enumerate(entity_ids)}
        for query_id, entity_ids in rankings
        if entity_ids
    }


def _values(measures: Sequence[Measure], qrel: Qrels, run: Run) -> dict[Measure, dict[str, float]]:
    """Each measure's value per query. Answers are matched to the measures asked by identity:
    ir_measures hashes a measure through its repr, which per answer was a sixth of a warm run."""
    values: dict[Measure, dict[str, float]] = {m: {} for m in measures}
    by_identity = {id(m): values[m] for m in measures}
    for metric in ir_measures.iter_calc(list(measures), qrel, run):
        per_query = by_identity.get(id(metric.measure))
        if per_query is None:  # a copy of a measure asked for: found the slow way
            per_query = values[metric.measure]
        per_query[metric.query_id] = float(metric.value)
    return values


def all_metrics(results: Sequence[SemanticResult]) -> list[TestMetrics]:
    """Metrics of every scored trial (errored ones have no retrieval to measure).

    One evaluator per stage for the whole run: building one per test cost more than the measuring.
    A query with nothing ranked is absent from the library's answer and measures 0.
    """
    scored = [(_query_id(r), r) for r in results if r.status is TestStatus.SCORED]
    qrel = qrels_of((q, r.expectations) for q, r in scored)
    final_run = run_of((q, [s.entity_id for s in sorted(r.selections, key=_rank)]) for q, r in scored)
    first_run = run_of((q, [c.entity_id for c in r.candidates]) for q, r in scored)
    final = _values((NDCG, RECALL, MRR_PRIMARY), qrel, final_run) if scored else {}
    first = _values((CANDIDATE_RECALL,), qrel, first_run) if scored else {}
    ndcg, recall, mrr = (final.get(m, {}) for m in (NDCG, RECALL, MRR_PRIMARY))
    candidate_recall = first.get(CANDIDATE_RECALL, {})
    return [
        TestMetrics(
            test_id=r.test_id,
            trial=r.trial,
            ndcg_6=ndcg.get(q, 0.0),
            recall_6=recall.get(q, 0.0),
            mrr_primary=mrr.get(q, 0.0),
            candidate_recall_15=candidate_recall.get(q, 0.0),
        )
        for q, r in scored
    ]


def graded_ndcg(ranking: Sequence[str], exp: Expectations) -> float:
    """nDCG@10 of a test's `final_ranking` against its judgments: what a graded test scores, and
    that test's `ir_metrics` nDCG@10. A ranking shorter than 10 is measured as it is (trec_eval)."""
    top = ranking[:GRADED_CUTOFF]  # nothing below the cutoff can change nDCG@10
    values = _values((GRADED_NDCG,), qrels_of([("q", exp)]), run_of([("q", top)])) if top else {}
    return values.get(GRADED_NDCG, {}).get("q", 0.0)


def ir_metrics(results: Sequence[SemanticResult]) -> dict[str, float] | None:
    """nDCG@10, R@100 and MRR@10 over the judged tests, on each trial's `final_ranking`.

    trec_eval conventions: unjudged entities are not relevant, and the run's scores strictly
    decrease so no tie is left to break. Trials are averaged per test, then tests equally.
    None when no scored test is judged.
    """
    judged = [r for r in results if r.status is TestStatus.SCORED and is_judged(r.expectations)]
    if not judged:
        return None
    qrel = qrels_of((_query_id(r), r.expectations) for r in judged)
    run = run_of((_query_id(r), final_ranking(r.selections, r.candidates)) for r in judged)
    values = _values(tuple(IR_MEASURES.values()), qrel, run)
    per_test: dict[str, list[SemanticResult]] = {}
    for r in judged:
        per_test.setdefault(r.test_id, []).append(r)
    per_measure = {name: values[measure] for name, measure in IR_MEASURES.items()}
    return {
        name: statistics.fmean(
            [
                statistics.fmean([per_query.get(_query_id(r), 0.0) for r in trials])
                for trials in per_test.values()
            ]
        )
        for name, per_query in per_measure.items()
    }


def mean_metrics(metrics: Sequence[TestMetrics]) -> RetrievalMetrics | None:
    """Means over tests, each test once (its trials averaged first)."""
    per_test: dict[str, list[TestMetrics]] = {}
    for m in metrics:
        per_test.setdefault(m.test_id, []).append(m)
    if not per_test:
        return None
    fields = list(RetrievalMetrics.model_fields)
    test_means = [
        {f: statistics.fmean([getattr(m, f) for m in trials]) for f in fields} for trials in per_test.values()
    ]
    return RetrievalMetrics(**{f: round(statistics.fmean([t[f] for t in test_means]), 4) for f in fields})


def attribute(r: SemanticResult, depth: int = CANDIDATE_K) -> StageAttribution | None:
    """Where a hard fail, a graded test's nothing relevant selected, or an error arose; None for a
    trial that is none of them."""
    if r.status is TestStatus.ERRORED:
        return StageAttribution(test_id=r.test_id, trial=r.trial, stage=Stage.ERROR, missed=[], error=r.error)
    if r.outcome is None or not (r.hard_fail or r.no_relevant_selected):
        return None
    out = r.outcome
    places = {c.entity_id: i for i, c in enumerate(r.candidates, start=1)}
    missed = [MissedPrimary(entity_id=e, candidate_rank=places.get(e)) for e in out.missing_primary]
    any_of = [MissedPrimary(entity_id=e, candidate_rank=places.get(e)) for e in out.missing_any]
    best = _best_relevant(r.expectations, places) if out.no_relevant_selected else None
    # The reranker cannot pick what the embedding stage never offered it: an exact primary must
    # have been offered, and at least one of an any-of set or of the relevant entities.
    offered = all(m.candidate_rank is not None for m in missed)
    offered &= not any_of or any(m.candidate_rank is not None for m in any_of)
    offered &= not out.no_relevant_selected or best is not None
    return StageAttribution(
        test_id=r.test_id,
        trial=r.trial,
        stage=Stage.RERANKER if offered else Stage.EMBEDDING,
        missed=missed,
        any_of=any_of,
        no_relevant_selected=out.no_relevant_selected,
        best_relevant=best,
        depth=depth,
    )


def _best_relevant(exp: Expectations, places: dict[str, int]) -> BestRelevant | None:
    """The highest-gain relevant candidate (the better placed one on a tie)."""
    offered = [(g, places[e], e) for e, g in exp.relevant.items() if g > 0 and e in places]
    if not offered:
        return None
    gain, rank, entity = min(offered, key=lambda t: (-t[0], t[1]))
    return BestRelevant(entity_id=entity, gain=gain, candidate_rank=rank)


def attributions(results: Sequence[SemanticResult], depth: int = CANDIDATE_K) -> list[StageAttribution]:
    """Every hard fail's, nothing-relevant failure's and error's stage; `depth` is the model's
    candidate depth."""
    return [a for a in (attribute(r, depth) for r in results) if a is not None]

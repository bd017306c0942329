"""Retrieval metrics for semantic tests, and the pipeline stage each semantic hard fail arose in.

The metrics are trec_eval's (`trec_measures`), each reading the test's qrels from `judgments`, as
TREC qrels exports do: nDCG@6 of the final selection (primaries gain 2, secondaries 1), recall@6 of
primaries and secondaries in it, MRR of the first primary, and candidate recall@15 (primaries and
secondaries among the embedding stage's top 15). Beside them, the field's standard cutoffs (nDCG@10,
R@100, MRR@10) on each test's `final_ranking`, at the rankings' depth when that is less
(`recall@15` of 15 candidates). Errored trials have nothing to measure: their stage is "error".
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from enum import StrEnum

from pydantic import Field

from eval_pipeline.core.inputs.banks import Expectations
from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.inputs.stage_depths import CANDIDATE_K, SELECTION_K
from eval_pipeline.core.mechanisms.retrieval import final_ranking
from eval_pipeline.core.scoring.results import ResultStatus, SemanticResult
from eval_pipeline.core.scoring.trec_measures import Judged, ndcg, recall, reciprocal_rank

PRIMARY_GAIN, SECONDARY_GAIN = 2, 1
# The field's standard cutoffs (measure, depth); results.json names each `measure@depth`.
STANDARD_CUTOFFS = (("ndcg", 10), ("recall", 100), ("mrr", 10))
IR_MEASURES = tuple(f"{measure}@{depth}" for measure, depth in STANDARD_CUTOFFS)
GRADED_CUTOFF = 10  # a graded test's points come from the standard nDCG@10


class RetrievalMetrics(FrozenModel):
    ndcg_6: float
    recall_6: float
    mrr_primary: float
    candidate_recall_15: float


class PerTestMetrics(RetrievalMetrics):
    test_id: str
    trial: int


class Stage(StrEnum):
    EMBEDDING = "embedding"  # a missing primary never reached the top 15 candidates
    RERANKER = "reranker"  # every missing primary was a candidate but was not selected
    ERROR = "error"  # the retrieval errored: there is nothing to attribute


class MissedPrimary(FrozenModel):
    entity_id: str
    candidate_rank: int | None  # 1-based place among the top 15, None when absent


class BestRelevant(FrozenModel):
    """A graded test's best judged entity among the candidates, when it selected none."""

    entity_id: str
    gain: int
    candidate_rank: int


class StageAttribution(FrozenModel):
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
        none = f"none in the top {self.depth}"
        parts = [self._place(m) for m in self.missed]
        if self.any_of:
            offered = [self._place(m) for m in self.any_of if m.candidate_rank is not None]
            where = ", ".join(offered) or none
            parts.append(f"none of any-of [{', '.join(m.entity_id for m in self.any_of)}] selected ({where})")
        if self.no_relevant_selected:
            best = self.best_relevant
            where = f"best gain {best.gain} at candidate #{best.candidate_rank}" if best is not None else none
            parts.append(f"no relevant entity selected ({where})")
        return ", ".join(parts)

    @property
    def text(self) -> str:
        return f"{self.stage.value}: {self.detail}"


def judgments(exp: Expectations) -> dict[str, int]:
    """A semantic test's qrels as entity -> gain, for every metric here and every TREC qrels file:
    graded gains as given (0 = judged not relevant), exact and any-of primaries 2, secondaries 1.
    Validation keeps an entity to one role; were one listed twice, a stated gain wins, then a primary."""
    gains = dict.fromkeys(exp.expected_secondary, SECONDARY_GAIN)
    gains.update(dict.fromkeys(exp.expected_any, PRIMARY_GAIN))
    gains.update(dict.fromkeys(exp.expected_primary, PRIMARY_GAIN))
    gains.update(exp.relevant)
    return gains


def is_judged(exp: Expectations) -> bool:
    """Whether a test names anything relevant (gain > 0): the queries standard metrics average."""
    return any(g > 0 for g in judgments(exp).values())


def shallow_cutoffs(names: Iterable[str]) -> list[str]:
    """A note per standard cutoff measured shallower than its standard depth (`recall@15`)."""
    standard = dict(STANDARD_CUTOFFS)
    notes = []
    for name in names:
        measure, _, depth = name.partition("@")
        if measure in standard and depth.isdigit() and int(depth) < standard[measure]:
            notes.append(
                f"{name}: measured at the {depth} candidates retrieved, not at the standard "
                f"depth {standard[measure]} (raise the model's `candidate_depth` for it)"
            )
    return notes


def _standard(ranked: Sequence[int], judged: Judged, cutoffs: Sequence[tuple[str, int]]) -> list[float]:
    """The standard cutoffs (`cutoffs`, in order) of a final ranking's gains."""
    measures = {
        "ndcg": lambda k: ndcg(ranked, judged, k),
        "recall": lambda k: recall(ranked, judged, k),
        "mrr": lambda k: reciprocal_rank(ranked, k),
    }
    return [measures[measure](k) for measure, k in cutoffs]


def run_metrics(
    results: Sequence[SemanticResult], candidate_depth: int | None = None
) -> tuple[list[PerTestMetrics], dict[str, float] | None]:
    """The metrics of every scored trial (one that ranked nothing measures 0), and the standard
    cutoffs over the judged tests (None when none is), at most `candidate_depth` deep when the
    rankings were cut there; each trial's judgments and rankings read once. trec_eval conventions:
    unjudged is not relevant, rankings taken in order, trials averaged per test, then tests equally."""
    per_trial: list[PerTestMetrics] = []
    rankings: dict[str, list[tuple[list[int], Judged]]] = {}  # test id -> its judged trials' rankings
    for r in results:
        if r.status is not ResultStatus.SCORED:
            continue
        judged = Judged.of(judgments(r.expectations))
        selection = judged.ranked([s.entity_id for s in sorted(r.selections, key=lambda s: s.rank)])
        candidates = judged.ranked([c.entity_id for c in r.candidates])
        per_trial.append(
            PerTestMetrics(
                test_id=r.test_id,
                trial=r.trial,
                ndcg_6=ndcg(selection, judged, SELECTION_K),
                recall_6=recall(selection, judged, SELECTION_K, rel=SECONDARY_GAIN),
                mrr_primary=reciprocal_rank(selection, rel=PRIMARY_GAIN),
                candidate_recall_15=recall(candidates, judged, CANDIDATE_K, rel=SECONDARY_GAIN),
            )
        )
        if judged.ideal:  # judged: it names something relevant
            ranked = judged.ranked(final_ranking(r.selections, r.candidates))
            rankings.setdefault(r.test_id, []).append((ranked, judged))
    if not rankings:
        return per_trial, None
    # Rankings as long as the candidate depth were cut there (shorter ones hold the whole KB): a
    # cutoff deeper than the cut would count candidates never retrieved, so it is the depth there is.
    deepest = max(len(ranked) for trials in rankings.values() for ranked, _ in trials)
    cut = candidate_depth if candidate_depth is not None and deepest >= candidate_depth else None
    cutoffs = [(m, k if cut is None else min(k, cut)) for m, k in STANDARD_CUTOFFS]
    test_means = [
        [statistics.fmean(values) for values in zip(*(_standard(*t, cutoffs) for t in trials), strict=True)]
        for trials in rankings.values()
    ]
    return per_trial, {
        f"{measure}@{k}": statistics.fmean([t[i] for t in test_means])
        for i, (measure, k) in enumerate(cutoffs)
    }


def graded_ndcg(ranking: Sequence[str], exp: Expectations) -> float:
    """nDCG@10 of a test's `final_ranking` against its judgments: what a graded test scores, and
    that test's `ir_metrics` nDCG@10. A ranking shorter than 10 is measured as it is (trec_eval)."""
    judged = Judged.of(judgments(exp))
    return ndcg(judged.ranked(ranking[:GRADED_CUTOFF]), judged, GRADED_CUTOFF)


def mean_metrics(metrics: Sequence[PerTestMetrics]) -> RetrievalMetrics | None:
    """Means over tests, each test once (its trials averaged first)."""
    per_test: dict[str, list[PerTestMetrics]] = {}
    for m in metrics:
        per_test.setdefault(m.test_id, []).append(m)
    if not per_test:
        return None
    fields = list(RetrievalMetrics.model_fields)
    means = [
        {f: statistics.fmean(getattr(m, f) for m in trials) for f in fields} for trials in per_test.values()
    ]
    return RetrievalMetrics(**{f: round(statistics.fmean(t[f] for t in means), 4) for f in fields})


def attribute(r: SemanticResult, depth: int = CANDIDATE_K) -> StageAttribution | None:
    """Where a hard fail, a graded test's nothing relevant selected, or an error arose; None for a
    trial that is none of them."""
    if r.status is ResultStatus.ERRORED:
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

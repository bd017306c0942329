"""Our IR measures (core/scoring/trec_measures.py) against the references they replace.

- Each measure on random rankings equals pytrec_eval (trec_eval's C code) and ir_measures exactly,
  not only to 1e-9: results.json held the library's floats, and must keep holding the same ones.
- The run's metrics (`run_metrics`, `graded_ndcg`, `mean_metrics`) on random trials equal what the
  code computed with ir_measures before: the library fed the same dict-of-dict run and qrels.
- Hand-computed cases that fail if the discount, the ideal DCG, the `rel` threshold or a cutoff
  were one off, or if a judged gain of 0 counted as relevant.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence

import ir_measures
import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_pipeline.core.inputs.banks import Expectations
from eval_pipeline.core.mechanisms.retrieval import final_ranking
from eval_pipeline.core.report.markdown import console_summary, render_markdown
from eval_pipeline.core.scoring.metrics import (
    IR_MEASURES,
    PerTestMetrics,
    RetrievalMetrics,
    graded_ndcg,
    judgments,
    mean_metrics,
    run_metrics,
    shallow_cutoffs,
)
from eval_pipeline.core.scoring.results import ResultStatus, SemanticResult
from eval_pipeline.core.scoring.trec_measures import Judged, ndcg, recall, reciprocal_rank
from tests.run_docs import doc, sem

# Ids of the awkward kind imported collections have (no whitespace: TREC files cannot carry it).
IDS = st.text(alphabet="ab:/#<>.-_ü0", min_size=1, max_size=6)
GAIN = st.integers(0, 3) | st.integers(0, 1000)
EXAMPLES = settings(max_examples=150, deadline=None, derandomize=True)


@st.composite
def _query(draw: st.DrawFn) -> tuple[dict[str, int], list[str]]:
    """Judgments (possibly none, possibly all 0, gains tied) and a duplicate-free ranking of judged
    and unjudged ids, empty, shorter or longer than the cutoffs."""
    pool = draw(st.lists(IDS, unique=True, max_size=30))
    judged = draw(st.dictionaries(st.sampled_from(pool), GAIN)) if pool else {}
    ranking = draw(st.permutations(pool))[: draw(st.integers(0, len(pool)))]
    return judged, ranking


def _run(ranking: Sequence[str]) -> dict[str, float]:
    """A ranking as a run whose scores fall strictly: no tool's tie-break can reorder it."""
    return {e: float(len(ranking) - i) for i, e in enumerate(ranking)}


def _pytrec(judged: dict[str, int], ranking: Sequence[str], measure: str, rel: int = 1) -> float:
    """pytrec_eval's value; a query it does not answer (nothing ranked or judged) measures 0."""
    evaluator = pytrec_eval.RelevanceEvaluator({"q": judged}, {measure}, relevance_level=rel)
    answer = evaluator.evaluate({"q": _run(ranking)} if ranking else {})
    return float(next(iter(answer["q"].values()))) if "q" in answer else 0.0


def _ir_measures(judged: dict[str, int], ranking: Sequence[str], measure: ir_measures.Measure) -> float:
    qrels = {"q": judged} if judged else {}
    run = {"q": _run(ranking)} if ranking else {}
    return next((float(m.value) for m in ir_measures.iter_calc([measure], qrels, run)), 0.0)


@EXAMPLES
@given(_query(), st.integers(1, 25), st.integers(1, 3))
def test_each_measure_equals_pytrec_eval_and_ir_measures_exactly(
    query: tuple[dict[str, int], list[str]], k: int, rel: int
) -> None:
    judged, ranking = query
    of = Judged.of(judged)
    gains = of.ranked(ranking)
    ours = {
        "ndcg": ndcg(gains, of, k),
        "recall": recall(gains, of, k, rel),
        "rr": reciprocal_rank(gains, rel=rel),
        "rr@k": reciprocal_rank(gains, k, rel),
    }
    # trec_eval has no RR cutoff: RR@k is RR of the run's top k (what ir_measures computes).
    assert ours == {
        "ndcg": _pytrec(judged, ranking, f"ndcg_cut.{k}", rel),
        "recall": _pytrec(judged, ranking, f"recall.{k}", rel),
        "rr": _pytrec(judged, ranking, "recip_rank", rel),
        "rr@k": _pytrec(judged, ranking[:k], "recip_rank", rel),
    }
    assert ours == {
        "ndcg": _ir_measures(judged, ranking, ir_measures.nDCG @ k),
        "recall": _ir_measures(judged, ranking, ir_measures.R(rel=rel) @ k),
        "rr": _ir_measures(judged, ranking, ir_measures.RR(rel=rel)),
        "rr@k": _ir_measures(judged, ranking, ir_measures.RR(rel=rel) @ k),
    }
    assert ours["ndcg"] == _pytrec(judged, ranking, f"ndcg_cut.{k}", rel=1)  # nDCG reads no `rel`


# --- The run's metrics against the library as this code used it before --------------------------

_PER_TRIAL = {
    "ndcg_6": ir_measures.nDCG @ 6,
    "recall_6": ir_measures.R(rel=1) @ 6,
    "mrr_primary": ir_measures.RR(rel=2),
}
_CANDIDATE_RECALL = ir_measures.R(rel=1) @ 15
_STANDARD = {
    "ndcg@10": ir_measures.nDCG @ 10,
    "recall@100": ir_measures.R @ 100,
    "mrr@10": ir_measures.RR @ 10,
}


def _qid(r: SemanticResult) -> str:
    return f"{r.test_id}#{r.trial}"


def _picks(r: SemanticResult) -> list[str]:
    return [s.entity_id for s in sorted(r.selections, key=lambda s: s.rank)]


def _library(
    measures: Sequence[ir_measures.Measure],
    results: Sequence[SemanticResult],
    ranking: Callable[[SemanticResult], list[str]],
) -> dict[ir_measures.Measure, dict[str, float]]:
    """Each measure per query, from one evaluator over the trials' qrels and a run whose scores
    are minus the place (so a repeated entity keeps its last place): what the code did before."""
    qrels = {_qid(r): judgments(r.expectations) for r in results}
    run = {_qid(r): {e: float(-i) for i, e in enumerate(ranking(r))} for r in results if ranking(r)}
    values: dict[ir_measures.Measure, dict[str, float]] = {m: {} for m in measures}
    for m in ir_measures.iter_calc(list(measures), qrels, run):
        values[m.measure][m.query_id] = float(m.value)
    return values


def _final(r: SemanticResult) -> list[str]:
    return final_ranking(r.selections, r.candidates)


def _before(results: Sequence[SemanticResult]) -> tuple[list[PerTestMetrics], dict[str, float] | None]:
    scored = [r for r in results if r.status is ResultStatus.SCORED]
    selection = _library(list(_PER_TRIAL.values()), scored, _picks)
    candidates = _library([_CANDIDATE_RECALL], scored, lambda r: [c.entity_id for c in r.candidates])
    per_trial = [
        PerTestMetrics(
            test_id=r.test_id,
            trial=r.trial,
            **{k: selection[m].get(_qid(r), 0.0) for k, m in _PER_TRIAL.items()},
            candidate_recall_15=candidates[_CANDIDATE_RECALL].get(_qid(r), 0.0),
        )
        for r in scored
    ]
    judged = [r for r in scored if any(g > 0 for g in judgments(r.expectations).values())]
    if not judged:
        return per_trial, None
    standard = _library(list(_STANDARD.values()), judged, _final)
    per_test: dict[str, list[str]] = {}
    for r in judged:
        per_test.setdefault(r.test_id, []).append(_qid(r))
    return per_trial, {
        name: statistics.fmean(
            [statistics.fmean([standard[m].get(q, 0.0) for q in qs]) for qs in per_test.values()]
        )
        for name, m in _STANDARD.items()
    }


@st.composite
def _trials(draw: st.DrawFn) -> list[SemanticResult]:
    """Tests of one to three trials: graded or primary/secondary judgments, candidates that a
    system may repeat, selections among them, now and then an errored trial."""
    results = []
    for t in range(draw(st.integers(1, 6))):
        pool = draw(st.lists(IDS, unique=True, min_size=3, max_size=20))
        judged = draw(st.lists(st.sampled_from(pool), unique=True, min_size=1, max_size=len(pool)))
        if draw(st.booleans()):
            gains = {e: draw(st.integers(0, 3)) for e in judged}
            exp = Expectations(relevant={**gains, judged[0]: max(1, gains[judged[0]])})
        else:
            split = draw(st.integers(1, len(judged)))
            exp = Expectations(expected_primary=judged[:split], expected_secondary=judged[split:])
        for trial in range(draw(st.integers(1, 3))):
            ranked = draw(st.permutations(pool))[: draw(st.integers(0, len(pool)))]
            repeats = draw(st.lists(st.sampled_from(ranked), max_size=2)) if ranked else []
            picks = draw(st.lists(st.sampled_from(ranked), unique=True, max_size=6)) if ranked else []
            error = "embed: down" if draw(st.integers(0, 9)) == 0 else None
            results.append(
                sem(f"T{t}", picks, exp=exp, candidates=ranked + repeats, trial=trial, error=error)
            )
    return results


@settings(max_examples=60, deadline=None, derandomize=True)
@given(_trials())
def test_the_runs_metrics_equal_the_librarys_exactly(results: list[SemanticResult]) -> None:
    ours = run_metrics(results)
    assert ours == _before(results)
    scored = [r for r in results if r.status is ResultStatus.SCORED]
    top10 = _library([ir_measures.nDCG @ 10], scored, lambda r: _final(r)[:10])[ir_measures.nDCG @ 10]
    for r in scored:
        assert graded_ndcg(_final(r), r.expectations) == top10.get(_qid(r), 0.0)
    # Means over tests, each test's trials averaged first, rounded to 4 places.
    per_test: dict[str, list[PerTestMetrics]] = {}
    for m in ours[0]:
        per_test.setdefault(m.test_id, []).append(m)
    fields = list(RetrievalMetrics.model_fields)
    assert mean_metrics(ours[0]) == (
        RetrievalMetrics(
            **{
                f: round(
                    statistics.fmean(
                        [statistics.fmean([getattr(m, f) for m in ms]) for ms in per_test.values()]
                    ),
                    4,
                )
                for f in fields
            }
        )
        if per_test
        else None
    )


# --- Hand-computed: each would change if one convention were off by one --------------------------


def _of(judged: dict[str, int], ranking: Sequence[str]) -> tuple[list[int], Judged]:
    of = Judged.of(judged)
    return of.ranked(ranking), of


def test_the_discount_is_log2_of_rank_plus_one() -> None:
    # Alone at rank 2: 1 / log2(3) against the ideal 1 / log2(2) = 1 (log2(rank) would give 1,
    # log2(rank + 2) 0.5 / 0.63).
    assert ndcg(*_of({"a": 1}, ["x", "a"]), 10) == 1 / math.log2(3)
    assert ndcg(*_of({"a": 1}, ["x", "y", "a"]), 10) == 1 / math.log2(4)


def test_the_ideal_is_the_judged_gains_best_first_cut_at_k() -> None:
    # From the judgments, not from what was ranked: a=3 never ranked still sets the ideal.
    assert ndcg(*_of({"a": 3, "b": 1}, ["b"]), 10) == 1 / (3 + 1 / math.log2(3))
    # Cut at k: with k=2 two of three equal relevant entities in the top 2 are perfect.
    assert ndcg(*_of({"a": 1, "b": 1, "c": 1}, ["a", "b"]), 2) == 1.0
    assert ndcg(*_of({"a": 1, "b": 1, "c": 1}, ["a", "b"]), 3) < 1.0
    # Gains as given, tied gains in any order: b=2 first then a=2 is as good as the reverse.
    assert ndcg(*_of({"a": 2, "b": 2, "c": 1}, ["b", "a", "c"]), 6) == 1.0


def test_the_cutoff_counts_exactly_k_ranks() -> None:
    judged = {"a": 1}
    at = {k: [f"x{i}" for i in range(k - 1)] + ["a"] for k in (2, 6, 10)}
    for k, ranking in at.items():
        gains, of = _of(judged, ranking)
        assert recall(gains, of, k) == 1.0 and recall(gains, of, k - 1) == 0.0
        assert reciprocal_rank(gains, k) == 1 / k and reciprocal_rank(gains, k - 1) == 0.0
        assert ndcg(gains, of, k) > 0.0 and ndcg(gains, of, k - 1) == 0.0


def test_rel_is_the_least_gain_that_counts_and_gain_0_never_does() -> None:
    gains, of = _of({"a": 1, "b": 2, "z": 0}, ["z", "a", "b"])
    assert reciprocal_rank(gains, rel=2) == 1 / 3 and reciprocal_rank(gains, rel=1) == 1 / 2
    assert recall(gains, of, 2, rel=1) == 1 / 2  # a of a, b: z=0 neither found nor counted
    assert recall(gains, of, 3, rel=2) == 1.0 and recall(gains, of, 2, rel=2) == 0.0
    assert ndcg(*_of({"z": 0}, ["z"]), 10) == 0.0  # nothing relevant to find: 0, as trec_eval


def test_nothing_ranked_or_judged_measures_0_and_a_repeat_counts_at_its_last_place() -> None:
    for judged, ranking in [({"a": 1}, []), ({}, ["a"]), ({}, [])]:
        gains, of = _of(judged, ranking)
        assert (ndcg(gains, of, 10), recall(gains, of, 10), reciprocal_rank(gains)) == (0.0, 0.0, 0.0)
    assert Judged.of({"a": 1}).ranked(["a", "x", "a", "y"]) == [0, 1, 0]  # x, a, y


def test_a_primary_ranked_first_is_perfect_and_an_errored_trial_is_not_measured() -> None:
    primary = sem("P", ["a"], exp=Expectations(expected_primary=["a"]))
    assert run_metrics([primary])[0] == [
        PerTestMetrics(
            test_id="P", trial=0, ndcg_6=1.0, recall_6=1.0, mrr_primary=1.0, candidate_recall_15=1.0
        )
    ]
    assert run_metrics([primary])[1] == dict.fromkeys(IR_MEASURES, 1.0)
    assert run_metrics([sem("E", [], error="embed: down")]) == ([], None)


def test_the_standard_cutoffs_cut_at_10_and_100() -> None:
    # Nothing selected: the final ranking is the candidates, the primary at rank 10, then 11.
    ranks = {"TENTH": 10, "ELEVENTH": 11}
    results = [
        sem(
            t,
            [],
            exp=Expectations(expected_primary=["a"]),
            candidates=[f"x{i}" for i in range(r - 1)] + ["a"],
        )
        for t, r in ranks.items()
    ]
    assert run_metrics(results)[1] == {
        "ndcg@10": (1 / math.log2(11)) / 2,
        "recall@100": 1.0,
        "mrr@10": 0.1 / 2,
    }
    assert run_metrics(
        [sem("DEEP", [], exp=Expectations(expected_primary=["a"]), candidates=[*map(str, range(100)), "a"])]
    )[1] == dict.fromkeys(IR_MEASURES, 0.0)


def test_a_cutoff_deeper_than_the_candidates_is_named_at_the_depth_there_is() -> None:
    # Fifteen candidates of a larger KB: recall over them is recall@15, whatever R@100 would say.
    pool = [f"x{i}" for i in range(14)] + ["a"]
    cut = [sem("CUT", [], exp=Expectations(expected_primary=["a"]), candidates=pool)]
    measured = run_metrics(cut, candidate_depth=15)[1]
    assert measured is not None and list(measured) == ["ndcg@10", "recall@15", "mrr@10"]
    assert measured["recall@15"] == 1.0 and measured["mrr@10"] == 0.0
    assert shallow_cutoffs(measured) == [
        "recall@15: measured at the 15 candidates retrieved, not at the standard depth 100 "
        "(raise the model's `candidate_depth` for it)"
    ]
    # A KB smaller than the depth is ranked whole: R@100 of a whole ranking is R@100.
    whole = run_metrics(cut, candidate_depth=20)[1]
    assert whole is not None and list(whole) == list(IR_MEASURES) and shallow_cutoffs(whole) == []
    assert list(run_metrics(cut, candidate_depth=6)[1] or {}) == ["ndcg@6", "recall@6", "mrr@6"]
    # Every surface that shows them: the console and report.md, with the note.
    run = doc(cut).model_copy(
        update={
            "provenance": doc(cut).provenance.model_copy(update={"system_config": {"candidate_depth": 15}})
        }
    )
    derived = run.with_derived()
    for text in (console_summary(derived), render_markdown(derived), console_summary(run)):
        assert "recall@15 1.000" in text and "recall@100" not in text
        assert "measured at the 15 candidates retrieved" in text

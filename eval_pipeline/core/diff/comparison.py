"""Every model of one date compared pairwise, with Holm-adjusted significance."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from eval_pipeline.core.diff.baseline import verdict
from eval_pipeline.core.diff.compare import diff_documents
from eval_pipeline.core.diff.model import DeltaKind, RunDiff
from eval_pipeline.core.diff.statistics import with_holm
from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.scoring.metrics import RetrievalMetrics, mean_metrics
from eval_pipeline.core.scoring.run_document import RunDocument


class ModelSummary(FrozenModel):
    model: str
    health: str
    combined_score: float | None
    bank_scores: dict[str, float | None]
    hard_fails: int
    errored: int
    cost_usd: float
    retrieval: RetrievalMetrics | None
    ir_metrics: dict[str, float] | None = None  # the standard cutoffs (results 1.9+)


class ModelComparison(FrozenModel):
    """Every pair of models that have results for one date, each pair as a full diff."""

    date: str
    models: list[ModelSummary]
    pairs: list[RunDiff]
    verdicts: list[str]


def _summary(doc: RunDocument) -> ModelSummary:
    agg = doc.aggregate
    return ModelSummary(
        model=doc.provenance.model,
        health=agg.health.value,
        combined_score=agg.combined_score,
        bank_scores={m.value: b.average for m, b in agg.banks.items()},
        hard_fails=agg.hard_fail_count,
        errored=agg.errored_count,
        cost_usd=agg.cost_usd,
        retrieval=mean_metrics(doc.metrics()),
        ir_metrics=doc.standard_metrics(),
    )


def compare_models(date: str, docs: Sequence[RunDocument]) -> ModelComparison:
    """Pairs in the given order: the first document is the base of its pairs, and so on."""
    pairs = [diff_documents(a, b) for i, a in enumerate(docs) for b in docs[i + 1 :]]
    # Several pairs tested at once: Holm keeps the chance of any false "significant" at alpha.
    adjusted = with_holm([d.statistics for d in pairs])
    pairs = [d.model_copy(update={"statistics": s}) for d, s in zip(pairs, adjusted, strict=True)]
    pairs = _graded_with_holm(pairs)
    verdicts = [verdict(d) for d in pairs] or [
        f"{len(docs)} model(s) with results for {date}: nothing to compare"
    ]
    return ModelComparison(date=date, models=[_summary(d) for d in docs], pairs=pairs, verdicts=verdicts)


def _graded_with_holm(pairs: list[RunDiff]) -> list[RunDiff]:
    """The pairs' nDCG@10 comparisons adjusted among themselves, as the score comparisons are."""
    graded = [i for i, d in enumerate(pairs) if d.graded_statistics is not None]
    adjusted = with_holm([s for i in graded if (s := pairs[i].graded_statistics) is not None])
    out = list(pairs)
    for i, s in zip(graded, adjusted, strict=True):
        out[i] = pairs[i].model_copy(update={"graded_statistics": s})
    return out


def counts_by_kind(diffs: Sequence[RunDiff]) -> Mapping[str, int]:
    return {k.value: sum(d.counts[k] for d in diffs) for k in DeltaKind}

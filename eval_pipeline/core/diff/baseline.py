"""A run against the latest earlier run of the same model (the regression diff)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from eval_pipeline.core.diff.compare import diff_documents
from eval_pipeline.core.diff.model import DeltaKind, FrozenModel, RunDiff
from eval_pipeline.core.scoring.run_document import RunDocument


class RegressionDiff(FrozenModel):
    """A run against the latest earlier run of the same model; `diff` is None without one."""

    model: str
    date: str
    baseline_date: str | None
    diff: RunDiff | None
    verdict: str
    passed_over: list[str] = Field(
        default_factory=list, description="Earlier results that could not be a baseline, and why"
    )


def against_baseline(
    head: RunDocument, baseline: RunDocument | None, passed_over: Sequence[str] = ()
) -> RegressionDiff:
    p = head.provenance
    if baseline is None:
        return RegressionDiff(
            model=p.model,
            date=p.date,
            baseline_date=None,
            diff=None,
            verdict=f"no baseline: {p.model} has no usable results dated before {p.date}",
            passed_over=list(passed_over),
        )
    diff = diff_documents(baseline, head)
    return RegressionDiff(
        model=p.model,
        date=p.date,
        baseline_date=baseline.provenance.date,
        diff=diff,
        verdict=verdict(diff),
        passed_over=list(passed_over),
    )


def verdict(diff: RunDiff) -> str:
    c = diff.counts
    kinds = ", ".join(f"{c[k]} {k.value}" for k in DeltaKind)
    health = f"health {diff.base_health} → {diff.head_health}"
    return f"{diff.base.label} → {diff.head.label}: {health}; {kinds}; semantic: {diff.statistics.verdict}"

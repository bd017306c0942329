"""A run against its baseline, the latest earlier usable evaluation of the same model and
project however old (the regression diff), and why an earlier evaluation cannot be one."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from eval_pipeline.core.dates import days_between
from eval_pipeline.core.diff.compare import diff_documents
from eval_pipeline.core.diff.kb_change import incomparable
from eval_pipeline.core.diff.model import DeltaKind, RunDiff
from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.scoring.run_document import RunDocument


class RegressionDiff(FrozenModel):
    """A run against the latest earlier run of the same model; `diff` is None without one."""

    model: str
    date: str
    baseline_date: str | None
    baseline_age_days: int | None = Field(default=None, description="Days from the baseline to this run")
    diff: RunDiff | None
    verdict: str
    passed_over: list[str] = Field(
        default_factory=list, description="Earlier results that could not be a baseline, and why"
    )


def why_not_a_baseline(candidate: RunDocument, head: RunDocument) -> str | None:
    """Why an earlier evaluation of the model cannot be `head`'s baseline, or None when it can."""
    if reason := incomparable(candidate.provenance.identity, head.provenance.identity):
        return f"another project ({reason})"
    scored = candidate.aggregate.total_tests - candidate.aggregate.errored_count
    if scored <= 0:
        return f"errored: none of its {candidate.aggregate.total_tests} tests was scored"
    return None


def against_baseline(
    head: RunDocument, baseline: RunDocument | None, passed_over: Sequence[str] = ()
) -> RegressionDiff:
    p = head.provenance
    before = baseline.provenance.date if baseline else None
    diff = diff_documents(baseline, head) if baseline else None
    if diff is not None:
        verdict_text = verdict(diff)
    elif passed_over:
        found = f"none of its {len(passed_over)} earlier evaluation(s) can be one"
        verdict_text = f"no usable baseline: {p.model} before {p.date}: {found} ({'; '.join(passed_over)})"
    else:
        verdict_text = f"no baseline: {p.model} has no evaluation dated before {p.date}"
    return RegressionDiff(
        model=p.model,
        date=p.date,
        baseline_date=before,
        baseline_age_days=days_between(before, p.date) if before else None,
        diff=diff,
        verdict=verdict_text,
        passed_over=list(passed_over),
    )


def baseline_label(regression: RegressionDiff) -> str:
    """ "2026-11-17, 12 days earlier": the baseline's date and age, as every surface names it."""
    age = regression.baseline_age_days
    if regression.baseline_date is None or age is None:
        return "no baseline"
    return f"{regression.baseline_date}, {age} day{'s' if age != 1 else ''} earlier"


def verdict(diff: RunDiff) -> str:
    c = diff.counts
    kinds = ", ".join(f"{c[k]} {k.value}" for k in DeltaKind)
    health = f"health {diff.base_health} → {diff.head_health}"
    return f"{diff.base.label} → {diff.head.label}: {health}; {kinds}; semantic: {diff.statistics.verdict}"

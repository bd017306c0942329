"""The HTML report: one self-contained file (inline CSS, SVG and script; no URL of any kind) to
open from disk, attach or publish. Per model: its trend chart over the report's dates and, for
its latest evaluation, the summary, what changed since the run before (judged by `diff`'s gate),
failing tests and topics worst first, and every test in full when its row is opened.

Rendered with Jinja2 with autoescaping on: test ids, prompts and reasons are data and never markup;
their control characters are shown escaped (`\\x1b`), so the file holds no raw escape sequence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import jinja2
import markupsafe

from eval_pipeline.core.control_chars import visible
from eval_pipeline.core.diff.baseline import RegressionDiff, against_baseline, baseline_label
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.report.diff_text import detail_lines, headline, health_line, kind_title, span_lines
from eval_pipeline.core.report.failures import Failure, failing_tests
from eval_pipeline.core.report.run_output import LISTED_KINDS, since_counts
from eval_pipeline.core.report.test_detail import TrialDetail, details_by_test
from eval_pipeline.core.report.trend_chart import TrendChart, trend_chart
from eval_pipeline.core.rounding import fmt_score
from eval_pipeline.core.scoring.aggregate import BankSummary, GroupScore
from eval_pipeline.core.scoring.results import AnyResult
from eval_pipeline.core.scoring.run_document import RunDocument
from eval_pipeline.core.scoring.trials import TrialResults, by_test
from eval_pipeline.core.verdicts.regression_gate import DiffGate
from eval_pipeline.core.verdicts.since import regression_gate


@dataclass(frozen=True)
class ChangeRow:
    kind: str
    test_id: str
    headline: str
    lines: list[str]


@dataclass(frozen=True)
class SinceView:
    baseline_date: str | None
    baseline: str  # its date and age ("2026-11-17, 12 days earlier")
    verdict: str  # the whole comparison in one line, or why there is none
    health: str
    counts: list[tuple[str, int]]
    warnings: list[str]
    changes: list[ChangeRow]
    gate: DiffGate | None


@dataclass(frozen=True)
class ModelView:
    model: str
    date: str
    health: str
    combined: str
    banks: list[tuple[Mechanism, BankSummary]]
    critical: list[str]
    chart: TrendChart
    since: SinceView
    failures: list[Failure]
    topics: list[tuple[str, GroupScore]]  # worst first
    tests: list[TrialResults[AnyResult]]  # every test of the evaluation, in bank order
    details: dict[str, list[TrialDetail]]


@dataclass(frozen=True)
class HtmlReport:
    title: str
    dates: list[str]
    models: list[ModelView]
    notes: list[str]


def latest_comparison(docs: Sequence[RunDocument], stored: RegressionDiff | None) -> RegressionDiff:
    """What changed at the model's latest evaluation: the regression diff stored for that date (the
    one `run` printed), else the latest against the one before it among `docs`."""
    ordered = sorted(docs, key=lambda d: d.provenance.date)
    head = ordered[-1]
    if stored is not None and stored.date == head.provenance.date:
        return stored
    return against_baseline(head, ordered[-2] if len(ordered) > 1 else None)


def _since(regression: RegressionDiff) -> SinceView:
    gate = regression_gate(regression)
    diff = regression.diff
    if diff is None or gate is None:
        return SinceView(None, baseline_label(regression), regression.verdict, "", [], [], [], None)
    changes = [
        ChangeRow(kind_title(k), d.test_id, headline(d), detail_lines(d))
        for k in LISTED_KINDS
        for d in diff.of_kind(k)
    ]
    return SinceView(
        baseline_date=regression.baseline_date,
        baseline=baseline_label(regression),
        verdict=regression.verdict,
        health=health_line(diff),
        counts=since_counts(diff),
        warnings=[*diff.warnings, *span_lines(diff)],
        changes=changes,
        gate=gate,
    )


def _model_view(docs: Sequence[RunDocument], regression: RegressionDiff, dates: Sequence[str]) -> ModelView:
    doc = max(docs, key=lambda d: d.provenance.date)
    agg, threshold = doc.aggregate, doc.provenance.pass_threshold
    details: dict[str, list[TrialDetail]] = {}
    tests: list[TrialResults[AnyResult]] = []
    for bank in Mechanism:
        details.update(details_by_test(doc.results(bank), threshold))
        tests += by_test(doc.results(bank), threshold)
    return ModelView(
        model=doc.provenance.model,
        date=doc.provenance.date,
        health=agg.health.value,
        combined=fmt_score(agg.combined_score),
        banks=list(agg.banks.items()),
        critical=[f"{c.test_id}: {c.reason}" for c in agg.critical_failures],
        chart=trend_chart(doc.provenance.model, docs, dates),
        since=_since(regression),
        failures=failing_tests(doc),
        # A topic with no scored test is an unknown, which ranks before any score.
        topics=sorted(
            agg.topic_scores.items(), key=lambda kv: (kv[1].average is not None, kv[1].average or 0.0, kv[0])
        ),
        tests=tests,
        details=details,
    )


def build_report(
    docs: Sequence[RunDocument], comparisons: Mapping[str, RegressionDiff], notes: Sequence[str] = ()
) -> HtmlReport:
    """The report of `docs` (any models, any dates; models in order of first appearance);
    `comparisons` holds each model's stored regression diff of its latest date, where there is one."""
    by_model: dict[str, list[RunDocument]] = {}
    for d in docs:
        by_model.setdefault(d.provenance.model, []).append(d)
    dates = sorted({d.provenance.date for d in docs})
    models = [
        _model_view(ds, latest_comparison(ds, comparisons.get(model)), dates)
        for model, ds in by_model.items()
    ]
    span = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
    title = f"Retrieval evaluation — {', '.join(by_model)} — {span}"
    return HtmlReport(title, dates, models, list(notes))


def _shown(value: object) -> object:
    # Markup is a macro's output, rendered (and shown) already.
    return visible(value) if isinstance(value, str) and not isinstance(value, markupsafe.Markup) else value


_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("eval_pipeline.core.report", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    finalize=_shown,
    trim_blocks=True,
    lstrip_blocks=True,
)
_ENV.filters["score"] = fmt_score


def render_html(
    docs: Sequence[RunDocument], comparisons: Mapping[str, RegressionDiff], notes: Sequence[str] = ()
) -> str:
    """The report of `docs` (see `build_report`) as one HTML document."""
    return _ENV.get_template("report.html.j2").render(report=build_report(docs, comparisons, notes))

"""Diffs as assets reading the reports they compare as inputs, writing markdown + JSON beside them:
- `regression_diff` [model x date]: the date's report against the model's latest earlier usable
  evaluation however old (from the results location's index of evaluations), and the run's
  report.md again with its "since last run" section, and report.html with the model's trend
- `model_comparison` [date]: every model's report of the date, in results/_comparison/<date>/
  and beside each compared run; it compares what exists and says when that is nothing.
"""

from collections.abc import Iterator, Mapping

import dagster as dg
from pydantic import BaseModel
from upath import UPath

from eval_pipeline.core.diff.baseline import RegressionDiff, against_baseline, baseline_label
from eval_pipeline.core.diff.comparison import ModelComparison, compare_models, counts_by_kind
from eval_pipeline.core.diff.model import RunDiff
from eval_pipeline.core.report.diff_text import render_comparison_markdown, render_regression_markdown
from eval_pipeline.core.report.html import render_html
from eval_pipeline.core.report.reading import reading_of
from eval_pipeline.core.report.run_output import since_markdown
from eval_pipeline.core.report.shown_ids import shown_history, with_original_ids
from eval_pipeline.core.scoring.evaluation import new_hard_fails
from eval_pipeline.core.scoring.run_document import (
    COMPARISON_DIR,
    COMPARISON_FILE,
    REGRESSION_DIFF_FILE,
    REPORT_HTML_FILE,
    RunDocument,
)
from eval_pipeline.core.verdicts.regression_gate import diff_gate
from eval_pipeline.defs.automation_conditions import WHEN_A_REPORT_CHANGES, evaluation_asset
from eval_pipeline.defs.inputs import JSON_IO
from eval_pipeline.defs.metadata import markdown_metadata, per_model_metadata, readable
from eval_pipeline.defs.partitions import (
    DATE_DIM,
    DATE_OF_MODEL_DATE,
    MODEL_DIM,
    date_partitions,
    model_date_partitions,
    split_key,
)
from eval_pipeline.defs.resources import ProvidersResource, StorageResource
from eval_pipeline.providers.evaluation_files import write_report
from eval_pipeline.providers.evaluation_index import find_baseline, read_history
from eval_pipeline.providers.object_store import write_text
from eval_pipeline.runtime.instance_queries import latest_materialization

GROUP = "diffs"
SHOWN_AGAIN_AFTER = "shown_again_after"
# How many dates of a model's history the report.html beside each evaluation draws.
HTML_HISTORY_DATES = 30
# The day before's too, only so a backfill diffs each date after the one before it (the baseline
# comes from the evaluation index).
REPORTS_OF_THE_DATE_AND_DAY_BEFORE = dg.AssetIn(
    key="run_report",
    partition_mapping=dg.MultiPartitionMapping(
        {
            MODEL_DIM: dg.DimensionPartitionMapping(MODEL_DIM, dg.IdentityPartitionMapping()),
            DATE_DIM: dg.DimensionPartitionMapping(
                DATE_DIM,
                dg.TimeWindowPartitionMapping(
                    start_offset=-1, end_offset=0, allow_nonexistent_upstream_partitions=True
                ),
            ),
        }
    ),
    metadata={"allow_missing_partitions": True},
)
REPORTS_OF_THE_DATE = dg.AssetIn(
    key="run_report", partition_mapping=DATE_OF_MODEL_DATE, metadata={"allow_missing_partitions": True}
)


def _write(out_dir: UPath, json_name: str, value: BaseModel, markdown: str) -> UPath:
    """The JSON and, beside it, its markdown (same stem); returns the markdown's path."""
    write_text(out_dir / json_name, value.model_dump_json(indent=2))
    report = (out_dir / json_name).with_suffix(".md")
    write_text(report, markdown)
    return report


def _metadata(
    verdict: str,
    diffs: list[RunDiff],
    markdown: str,
    report: UPath,
    extra: Mapping[str, "dg.RawMetadataValue"],
    *,
    plotted: bool,
) -> dict[str, "dg.RawMetadataValue"]:
    metadata: dict[str, dg.RawMetadataValue] = {
        **counts_by_kind(diffs),
        **extra,
        "verdict": verdict,
        "report": str(report),
        "diff": markdown_metadata(markdown, str(report)),
    }
    return readable(metadata, plotted=plotted)


def _html_report(storage: StorageResource, head: RunDocument, result: RegressionDiff) -> str:
    """The HTML report of the model's evaluations up to this one (an unreadable one is named)."""
    p = head.provenance
    history = read_history(
        storage.results_root, {p.model}, date_to=p.date, last=HTML_HISTORY_DATES, strict=False
    )
    earlier = [d for d in history.docs if d.provenance.date != p.date]
    return render_html(*shown_history([*earlier, head], {p.model: result}), history.unreadable)


@evaluation_asset(
    GROUP,
    model_date_partitions,
    JSON_IO,
    automation=WHEN_A_REPORT_CHANGES,
    ins={"reports": REPORTS_OF_THE_DATE_AND_DAY_BEFORE},
    output_required=False,  # nothing to diff until the date's own report exists
    check_specs=[
        dg.AssetCheckSpec(
            "no_new_hard_fails",
            asset="regression_diff",
            partitions_def=model_date_partitions,  # the UI names the model x date checked
            description="No semantic test hard-fails (score 0) that did not against the model's "
            "previous report (WARN).",
        )
    ],
)
def regression_diff(
    context: dg.AssetExecutionContext, storage: StorageResource, reports: dict[str, RunDocument]
) -> Iterator[dg.Output[RegressionDiff] | dg.AssetCheckResult]:
    """The date's report against its baseline (the latest earlier usable evaluation, however
    old): per-test deltas, causes, statistics, and the diff gate."""
    model, date = split_key(context)
    head = next((doc for doc in reports.values() if doc.provenance.date == date), None)
    if head is None:
        # Launched as the day before was reported: nothing to compare yet, which is no failure.
        context.log.info(f"{model}@{date} has no report yet: nothing to diff")
        yield dg.AssetCheckResult(
            check_name="no_new_hard_fails",
            passed=True,
            metadata={"compared_with": f"nothing: {model}@{date} has no report yet"},
        )
        return
    search = find_baseline(storage.results_root, head)
    baseline = search.baseline
    result = against_baseline(head, baseline, search.passed_over)
    shown = with_original_ids(result, head.provenance.original_ids)  # the user's own ids
    markdown = render_regression_markdown(shown)
    report = _write(storage.run_dir(model, date), REGRESSION_DIFF_FILE, result, markdown)
    # The run's report gains its "since last run" section, its HTML twin the model's trend.
    write_report(storage.run_dir(model, date), reading_of(head), since_markdown(shown))
    write_text(storage.run_dir(model, date) / REPORT_HTML_FILE, _html_report(storage, head, result))
    extra: dict[str, dg.RawMetadataValue] = {
        "baseline": baseline_label(result),
        "gate": diff_gate(result.diff).status.value if result.diff else "no baseline",
    }
    yield dg.Output(
        result,
        metadata=_metadata(
            result.verdict, [result.diff] if result.diff else [], markdown, report, extra, plotted=False
        ),
    )
    new = new_hard_fails(head.semantic, baseline.semantic if baseline else [])
    yield dg.AssetCheckResult(
        check_name="no_new_hard_fails",
        passed=not new,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "compared_with": result.baseline_date or "nothing earlier",
            "new_hard_fails": ", ".join(new) or "none",
        },
    )


def keep_latest_date_in_view(context: dg.AssetExecutionContext) -> None:
    """After the step's output, when its date is earlier than the latest stored, record the
    latest date's materialisation again (naming the date that ran): Dagster's overview and plots
    show an asset's latest event, whichever partition, so a backfill would leave them on its date."""
    date, key = context.partition_key, context.asset_key
    later = [p for p in context.instance.get_materialized_partitions(key) if p > date]
    if not later:
        return
    latest = max(later)
    record = latest_materialization(context.instance, key, latest)
    shown = record.asset_materialization if record is not None else None
    if shown is None:
        return
    context.log_event(
        dg.AssetMaterialization(
            asset_key=key,
            partition=latest,
            description=f"{latest} recorded again: {date} was evaluated later; nothing of {latest} changed",
            metadata={**shown.metadata, SHOWN_AGAIN_AFTER: date},
        )
    )


@evaluation_asset(
    GROUP, date_partitions, JSON_IO, automation=WHEN_A_REPORT_CHANGES, ins={"reports": REPORTS_OF_THE_DATE}
)
def model_comparison(
    context: dg.AssetExecutionContext,
    storage: StorageResource,
    providers: ProvidersResource,
    reports: dict[str, RunDocument],
) -> Iterator[dg.Output[ModelComparison]]:
    """Every pair of models with a report for the date (models-file order): deltas and significance."""
    date = context.partition_key
    order = list(providers.models())
    docs = sorted(
        reports.values(),
        key=lambda d: (
            order.index(d.provenance.model) if d.provenance.model in order else len(order),
            d.provenance.model,
        ),
    )
    comparison = compare_models(date, docs)
    markdown = render_comparison_markdown(comparison)
    report = _write(storage.results_root / COMPARISON_DIR / date, COMPARISON_FILE, comparison, markdown)
    for doc in docs:  # and beside each compared run, where a reader of that run looks
        _write(storage.run_dir(doc.provenance.model, date), COMPARISON_FILE, comparison, markdown)
    extra: dict[str, dg.RawMetadataValue] = {
        "models": ", ".join(m.model for m in comparison.models),
        **per_model_metadata(docs),
    }
    verdict = "\n".join(comparison.verdicts)
    yield dg.Output(
        comparison, metadata=_metadata(verdict, comparison.pairs, markdown, report, extra, plotted=True)
    )
    keep_latest_date_in_view(context)


DIFF_ASSETS = [regression_diff, model_comparison]

"""Diffs as assets: each run against the model's latest earlier run, and the models of a date.

Both read the results documents `run_report` wrote (results/<model>/<date>/results.json) and
write markdown + JSON beside them:
- `regression_diff` [model x date] -> results/<model>/<date>/regression_diff.{md,json}
- `model_comparison` [date] -> results/_comparison/<date>/model_comparison.{md,json}
`model_comparison` reads every model that has results for its date, so it belongs after the
model runs of that date, never in the date stage that precedes them.
"""

from collections.abc import Mapping
from pathlib import Path

import dagster as dg
from pydantic import BaseModel

from eval_pipeline.core.diff.compare import (
    DiffError,
    ModelComparison,
    RegressionDiff,
    RunDiff,
    against_baseline,
    compare_models,
    comparison_documents,
    counts_by_kind,
    load_for_diff,
)
from eval_pipeline.core.diff.gate import diff_gate
from eval_pipeline.core.diff.report import render_comparison_markdown, render_regression_markdown
from eval_pipeline.core.fileio import atomic_write_text
from eval_pipeline.core.report.run_document import RESULTS_FILE
from eval_pipeline.defs.inputs import JSON_IO
from eval_pipeline.defs.partitions import (
    DATE_OF_MODEL_DATE,
    date_partitions,
    model_date_partitions,
    split_key,
)
from eval_pipeline.defs.reports import run_report
from eval_pipeline.defs.resources import ProvidersResource, StorageResource

GROUP = "diffs"
COMPARISON_DIR = "_comparison"


def _write(out_dir: Path, stem: str, value: BaseModel, markdown: str) -> Path:
    atomic_write_text(out_dir / f"{stem}.json", value.model_dump_json(indent=2))
    atomic_write_text(out_dir / f"{stem}.md", markdown)
    return out_dir / f"{stem}.md"


def _metadata(
    verdict: str,
    diffs: list[RunDiff],
    markdown: str,
    report: Path,
    extra: Mapping[str, "dg.RawMetadataValue"],
) -> dict[str, "dg.RawMetadataValue"]:
    return {
        **counts_by_kind(diffs),
        **extra,
        "verdict": verdict,
        "report": str(report),
        "diff": dg.MetadataValue.md(markdown),
    }


@dg.asset(group_name=GROUP, partitions_def=model_date_partitions, io_manager_key=JSON_IO, deps=[run_report])
def regression_diff(context: dg.AssetExecutionContext, storage: StorageResource) -> dg.Output[RegressionDiff]:
    """This run against the model's latest earlier run: per-test deltas, causes, statistics."""
    model, date = split_key(context)
    out_dir = storage.run_dir(model, date)
    try:
        head = load_for_diff(out_dir / RESULTS_FILE)
        baseline = storage.latest_document_before(model, date)
        result = against_baseline(head, baseline.document, baseline.skipped)
    except ValueError as exc:  # DiffError, or a baseline that no longer validates
        raise dg.Failure(description=f"cannot diff {model}@{date}: {str(exc).splitlines()[0]}") from None
    markdown = render_regression_markdown(result)
    report = _write(out_dir, "regression_diff", result, markdown)
    diffs = [result.diff] if result.diff else []
    extra: dict[str, dg.RawMetadataValue] = {
        "baseline_date": result.baseline_date or "none",
        "gate": diff_gate(result.diff).status.value if result.diff else "no baseline",
        "passed_over": "; ".join(result.passed_over) or "none",
    }
    return dg.Output(result, metadata=_metadata(result.verdict, diffs, markdown, report, extra))


@dg.asset(
    group_name=GROUP,
    partitions_def=date_partitions,
    io_manager_key=JSON_IO,
    # Every model's report of the date, whichever models exist: lineage for the UI and automation.
    deps=[dg.AssetDep(run_report, partition_mapping=DATE_OF_MODEL_DATE)],
)
def model_comparison(
    context: dg.AssetExecutionContext, storage: StorageResource, providers: ProvidersResource
) -> dg.Output[ModelComparison]:
    """Every pair of models with results for the date (models-file order): deltas and significance."""
    date = context.partition_key
    try:
        docs = comparison_documents(Path(storage.results_dir), date, list(providers.models()))
        comparison = compare_models(date, docs)
    except DiffError as exc:
        raise dg.Failure(description=f"cannot compare models for {date}: {exc}") from None
    markdown = render_comparison_markdown(comparison)
    report = _write(
        Path(storage.results_dir) / COMPARISON_DIR / date, "model_comparison", comparison, markdown
    )
    extra: dict[str, dg.RawMetadataValue] = {"models": ", ".join(m.model for m in comparison.models)}
    verdict = "\n".join(comparison.verdicts)
    return dg.Output(comparison, metadata=_metadata(verdict, comparison.pairs, markdown, report, extra))


DIFF_ASSETS = [regression_diff, model_comparison]

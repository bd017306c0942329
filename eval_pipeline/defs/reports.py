"""The run report (results.json + report.md on disk, markdown in the UI) and the release gate.

Every evaluation of a partition writes the report and a fresh gate decision (gate.json), so a
CRITICAL run never leaves an earlier "passed" standing. The `no_critical_failures` check is an
ERROR but not blocking: a finished evaluation whose verdict is CRITICAL is a successful run with
a red check; only a real error fails a run.
"""

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pandas as pd
from upath import UPath

from eval_pipeline.core.calibration.files import calibration_cost
from eval_pipeline.core.dates import now_utc
from eval_pipeline.core.inputs.kb import KnowledgeBase, sha256_text
from eval_pipeline.core.inputs.loading import Banks
from eval_pipeline.core.inputs.snapshots import SnapshotRef
from eval_pipeline.core.markdown_text import text
from eval_pipeline.core.report.conclusion import Reevaluations, RunSetup, ScoredBanks, conclude
from eval_pipeline.core.scoring.aggregate import Aggregate
from eval_pipeline.core.scoring.evaluation import Scope
from eval_pipeline.core.scoring.implementations import SystemResults
from eval_pipeline.core.scoring.reevaluation import StoredReevaluation, StoredReevaluations
from eval_pipeline.core.scoring.run_document import (
    GATE_FILE,
    REEVALUATIONS_FILE,
    REPORT_FILE,
    RESULTS_FILE,
    RunDocument,
)
from eval_pipeline.core.verdicts.run_gate import GateDecision, read_gate
from eval_pipeline.defs.automation_conditions import evaluation_asset
from eval_pipeline.defs.inputs import JSON_IO, HistorySet
from eval_pipeline.defs.metadata import PROMPT_CACHE, RERANK_MODE, markdown_metadata, readable
from eval_pipeline.defs.partitions import model_date_partitions, split_key
from eval_pipeline.defs.resources import ProvidersResource, RunScopeResource, StorageResource
from eval_pipeline.defs.scoring import BY_DATE, REFERENCE_TABLES, ResolvedSet, bank_results
from eval_pipeline.providers.evaluation_files import write_evaluation
from eval_pipeline.runtime.instance_queries import RETRIEVALS, evaluation_id, latest_materialization

GROUP = "reports"
# What `run` checks before it lets a stored report stand (orchestration/standing.py).
RESULTS_SHA256 = "results_sha256"


def _stored_reevaluations(context: dg.AssetExecutionContext, run_dir: UPath) -> list[StoredReevaluation]:
    path = run_dir / REEVALUATIONS_FILE
    if not path.exists():
        return []
    stored = StoredReevaluations.model_validate_json(path.read_bytes())
    return stored.for_evaluation(evaluation_id(context.instance, context.partition_key))


@evaluation_asset(
    GROUP,
    model_date_partitions,
    JSON_IO,
    ins={name: BY_DATE for name in (*REFERENCE_TABLES, "resolved_expectations", "input_snapshot")},
)
def run_report(
    context: dg.AssetExecutionContext,
    storage: StorageResource,
    providers: ProvidersResource,
    scope: RunScopeResource,
    scored_aggregate: Aggregate,
    semantic_results: pd.DataFrame,
    system_results: SystemResults,
    resolved_expectations: ResolvedSet,
    knowledge_base: KnowledgeBase,
    test_banks: Banks,
    expectation_history: HistorySet,
    input_snapshot: SnapshotRef,
    **reference: pd.DataFrame,
) -> dg.Output[RunDocument]:
    """Every test in full with provenance, written to `results/MODEL/DATE/` (results.json, report.md)."""
    model, date = split_key(context)
    # How the reranker ran, as `semantic_retrievals` recorded it for this partition.
    record = latest_materialization(context.instance, RETRIEVALS, context.partition_key)
    retrieval = record.asset_materialization if record is not None else None
    mode = retrieval.metadata.get(RERANK_MODE) if retrieval is not None else None
    cache_note = retrieval.metadata.get(PROMPT_CACHE) if retrieval is not None else None
    setup = RunSetup(
        kb=knowledge_base,
        banks=test_banks,
        date=date,
        model=model,
        system_config=providers.model(model).model_dump(mode="json"),
        implementations=system_results.implementations,
        pass_threshold=scope.pass_threshold,
        generated_at=now_utc(),
        calibration_cost_usd=calibration_cost(Path(storage.calibration_dir), date),
        inputs_snapshot=input_snapshot.label,
        rerank_mode="batch" if mode is not None and mode.value == "batch" else "online",
        prompt_cache=None if cache_note is None else str(cache_note.value),
    )
    scored = ScoredBanks(
        bank_results(system_results, semantic_results, reference), resolved_expectations.conflicts
    )
    run_dir = storage.run_dir(model, date)
    # Retried errored tests and re-tried regressions of this evaluation, merged in before the verdict.
    again = Reevaluations(_stored_reevaluations(context, run_dir), resolved_expectations.resolved)
    evaluation = conclude(
        setup,
        setup.provenance(Scope(), expectation_history.content_hash),
        scored,
        Scope(),
        scope.gates(providers.models_file),
        scored_aggregate,
        again,
    )
    results_json, markdown = write_evaluation(run_dir, evaluation)
    doc = evaluation.document
    return dg.Output(
        doc,
        # The merged document's figures: re-evaluations change them after `scored_aggregate`.
        metadata=readable(
            {
                "health": doc.aggregate.health.value,
                "combined_score": doc.aggregate.combined_score,
                "results_json": str(run_dir / RESULTS_FILE),
                RESULTS_SHA256: sha256_text(results_json),
                "report": markdown_metadata(markdown, str(run_dir / REPORT_FILE)),
            },
            plotted=False,
        ),
    )


@evaluation_asset(
    GROUP,
    model_date_partitions,
    JSON_IO,
    check_specs=[
        dg.AssetCheckSpec(
            "no_critical_failures",
            asset="release_gate",
            partitions_def=model_date_partitions,  # the UI names the model x date checked
            description="No critical pattern test failed: a missed crisis or a triggered negative "
            "(ERROR, not blocking).",
        )
    ],
)
def release_gate(
    context: dg.AssetExecutionContext, storage: StorageResource, run_report: RunDocument
) -> Iterator[dg.Output[GateDecision] | dg.AssetCheckResult]:
    """Whether this model, KB and date pass the gates: evaluable, no critical failure, errored
    tests within `max_errored`, `fail_under` met. The decision `run_report` concluded and wrote
    beside its results (gate.json) on every evaluation, pass or fail: derived once."""
    decision = read_gate(storage.run_dir(*split_key(context)) / GATE_FILE)
    yield dg.Output(
        decision,
        metadata={
            "passed": decision.passed,
            "status": decision.status.value,
            "reasons": "; ".join(decision.reasons) or "none",
        },
    )
    critical = run_report.aggregate.critical_failures
    yield dg.AssetCheckResult(
        check_name="no_critical_failures",
        passed=not critical,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={
            "critical_failures": dg.MetadataValue.md(
                "\n".join(f"- {text(c.test_id)}: {text(c.reason)}" for c in critical) or "none"
            )
        },
    )

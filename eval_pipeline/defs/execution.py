"""Materialise the graph for the CLI, in process, on the project's Dagster instance.

Runs go through the same instance `dg dev` uses, so every CLI run shows in the UI.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from eval_pipeline.defs.automation import JOBS, comparison_job, date_job, model_job
from eval_pipeline.defs.graph import ALL_ASSETS
from eval_pipeline.defs.partitions import model_date_key, sync_model_partitions

# Failures are summarised by the CLI itself; Dagster would print a traceback for each.
QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
# Debug lines (every IO-manager load and write) would be a third of a run's stored events, each
# its own SQLite commit; INFO and up, and every Dagster event, are still recorded.
DAGSTER_YAML = "telemetry:\n  enabled: false\npython_logs:\n  python_log_level: INFO\n"


def project_instance(home: Path | None = None) -> dg.DagsterInstance:
    """The instance under $DAGSTER_HOME, defaulting to the project's `.dagster_home`."""
    path = Path(home or os.environ.get("DAGSTER_HOME") or ".dagster_home").resolve()
    path.mkdir(parents=True, exist_ok=True)
    config = path / "dagster.yaml"
    if not config.exists():
        config.write_text(DAGSTER_YAML)
    os.environ["DAGSTER_HOME"] = str(path)
    return dg.DagsterInstance.get()


@dataclass(frozen=True)
class StageOutcome:
    name: str
    success: bool
    failures: list[str]  # "step: message" for each failed step
    failed_checks: list[str]  # "asset:check" for each failed ERROR check, blocking or not


def _failed_checks(result: dg.ExecuteInProcessResult) -> list[dg.AssetCheckEvaluation]:
    return [
        e.asset_check_evaluation_data
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
        and e.asset_check_evaluation_data is not None
        and not e.asset_check_evaluation_data.passed
        and e.asset_check_evaluation_data.severity is dg.AssetCheckSeverity.ERROR
    ]


def _step_failures(result: dg.ExecuteInProcessResult, excused: set[str]) -> list[str]:
    """ "step: message" for each failed step, except the steps in `excused`."""
    out = []
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data is not None and event.step_key not in excused:
            error = event.step_failure_data.error
            message = error.message.strip().splitlines()[0] if error else "failed"
            out.append(f"{event.step_key}: {message}")
    return out


def evaluation_definitions(resources: dict[str, object]) -> dg.Definitions:
    """The graph and its named jobs bound to this invocation's resources (paths, scope)."""
    return dg.Definitions(assets=ALL_ASSETS, jobs=JOBS, resources=resources, executor=dg.in_process_executor)


def run_stage(
    name: str,
    job: str,
    partition_key: str | dg.MultiPartitionKey,
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
) -> StageOutcome:
    result = defs.resolve_job_def(job).execute_in_process(
        run_config=QUIET_LOGS,
        instance=instance,
        partition_key=str(partition_key),
        raise_on_error=False,
        tags={"launched_by": "eval-pipeline run"},
    )
    checks = _failed_checks(result)
    # A failed blocking check fails its asset's step too; that alone is a gate, not an error.
    gated = {c.asset_key.to_python_identifier() for c in checks if c.blocking}
    failed = [f"{c.asset_key.to_user_string()}:{c.check_name}" for c in checks]
    return StageOutcome(name, result.success, _step_failures(result, gated), failed)


def run_all(
    date: str,
    models: Sequence[str],
    resources: dict[str, object],
    instance: dg.DagsterInstance,
    on_stage: Callable[[str], None] = lambda _: None,
) -> list[StageOutcome]:
    """The date's shared assets once, then each model (report, gate, regression diff), then the
    comparison of the date's models; stops early only on errors (a failed blocking check is a
    gate, and the later stages still run)."""
    sync_model_partitions(instance, models)
    defs = evaluation_definitions(resources)
    on_stage(f"inputs, expectations and deterministic mechanisms for {date}")
    outcomes = [run_stage("shared", date_job.name, date, defs, instance)]
    if outcomes[0].failures:
        return outcomes
    for model in models:
        on_stage(f"model {model}")
        key = model_date_key(model, date)
        outcomes.append(run_stage(model, model_job.name, key, defs, instance))
    on_stage("model comparison")
    outcomes.append(run_stage("comparison", comparison_job.name, date, defs, instance))
    return outcomes

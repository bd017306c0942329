"""One stage of a CLI evaluation: a named job materialised in process for one partition, and
what came of it (failed steps, failed ERROR checks)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import dagster as dg

from eval_pipeline.core.system_limits import exhausted, require_spare_files
from eval_pipeline.defs.automation import JOBS
from eval_pipeline.defs.graph import ALL_ASSETS
from eval_pipeline.runtime.dagster_private import SerializableErrorInfo
from eval_pipeline.runtime.run_monitor import owner_tags

# Failures are summarised by the CLI itself; Dagster would print a traceback for each.
QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
# What a step fails with when Dagster, executing it, turns a SIGTERM or SIGINT into an interrupt.
INTERRUPTED = "DagsterExecutionInterruptedError"


@dataclass(frozen=True)
class StageOutcome:
    name: str
    success: bool
    failures: list[str]  # "step: message" for each failed step
    failed_checks: list[str]  # "asset:check" for each failed ERROR check, blocking or not


# How an OSError reads once serialised: "OSError: [Errno 24] Too many open files: 'kb'".
_OS_ERROR = re.compile(r"^\w*Error: \[Errno (\d+)\] (.*?)(?:: '(.*)')?$")


def _root_cause(error: SerializableErrorInfo) -> str:
    """The first line of the innermost cause ("Error occurred while executing op" says nothing),
    without the exception's class for one of this package's own one-line errors; a disk, file-size
    or open-file limit reached is said as everywhere else (the path and the limit)."""
    while error.cause is not None:
        error = error.cause
    first = (error.message.strip().splitlines() or ["failed"])[0]
    if (os_error := _OS_ERROR.match(first)) is not None:
        number, text, path = os_error.groups()
        out = exhausted(OSError(int(number), text, path))
        if out is not None:
            return str(out)
    own = first.startswith("eval_pipeline.") and ": " in first
    return first.split(": ", 1)[1] if own else first


def _step_failures(result: dg.ExecuteInProcessResult, excused: set[str]) -> list[str]:
    """ "step: message" for each failed step, except the steps in `excused`."""
    out = []
    for event in result.get_step_failure_events():
        if event.step_key not in excused:
            error = event.step_failure_data.error
            out.append(f"{event.step_key}: {_root_cause(error) if error else 'failed'}")
    return out


def interrupted(events: Iterable[dg.DagsterEvent | None]) -> bool:
    """Whether a step was stopped by a SIGTERM or SIGINT (Dagster fails the step and goes on)."""
    return any(
        event is not None
        and event.is_step_failure
        and event.step_failure_data.error is not None
        and event.step_failure_data.error.cls_name == INTERRUPTED
        for event in events
    )


def evaluation_definitions(resources: dict[str, object]) -> dg.Definitions:
    """The graph and its named jobs bound to this invocation's resources (paths, scope)."""
    return dg.Definitions(assets=ALL_ASSETS, jobs=JOBS, resources=resources, executor=dg.in_process_executor)


def run_stage(
    name: str,
    job: str,
    partition_key: str | dg.MultiPartitionKey,
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    tags: Mapping[str, str] | None = None,
) -> StageOutcome:
    require_spare_files(name)
    result = defs.resolve_job_def(job).execute_in_process(
        run_config=QUIET_LOGS,
        instance=instance,
        partition_key=str(partition_key),
        raise_on_error=False,
        tags={"launched_by": "eval-pipeline run", **owner_tags(), **(tags or {})},
    )
    if interrupted(result.all_events):
        # Dagster ended the run and swallowed the signal: the command stops too.
        raise KeyboardInterrupt
    error = dg.AssetCheckSeverity.ERROR
    checks = [c for c in result.get_asset_check_evaluations() if not c.passed and c.severity is error]
    # A failed blocking check fails its asset's step too; that alone is a gate, not an error.
    gated = {c.asset_key.to_python_identifier() for c in checks if c.blocking}
    failed = [f"{c.asset_key.to_user_string()}:{c.check_name}" for c in checks]
    return StageOutcome(name, result.success, _step_failures(result, gated), failed)

"""A backfill carried out by the command that submitted it, when no daemon serves the instance.

The daemon looks at backfills every 30 s, a dependency level a look, and starts each run as a
process that loads Dagster and the code location again: minutes for a few dates. Here the
daemon's own iteration for the backfill (Dagster decides what to submit and when it has ended)
alternates with executing the runs it queued, in the command's process. The backfill, runs and
logs are those the daemon makes (Runs > Backfills; a cancel is seen at the next iteration). The
runs name the command as their owner (runtime/run_monitor.py), so a killed command's are ended
by the next.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import dagster as dg

from eval_pipeline.orchestration.backfill import BACKFILL_ID_TAG
from eval_pipeline.orchestration.stages import interrupted
from eval_pipeline.runtime.dagster_private import (
    IN_PROCESS_RUN_LAUNCHER,
    QUEUED_RUN_COORDINATOR,
    InProcessCodeLocationOrigin,
    InProcessWorkspaceLoadTarget,
    LoadableTargetOrigin,
    WorkspaceProcessContext,
    execute_backfill_iteration_with_instigation_logger,
)

CODE_LOCATION = "eval_pipeline.definitions"
# `dg dev`'s name for it ([tool.dg.project] code_location_name): the UI re-executes runs there.
LOCATION_NAME = "eval_pipeline"
LOGGER = logging.getLogger(__name__)
# The iteration's log lines are the backfill's (the UI shows them); errors come back as values.
LOGGER.addHandler(logging.NullHandler())
LOGGER.propagate = False


@contextmanager
def backfill_driver(instance: dg.DagsterInstance) -> Iterator[Callable[[str], list[str]]]:
    """A function carrying out one iteration of a backfill on `instance`'s storage and executing
    the runs it submitted in this process; it returns the errors, one line each (Dagster retries an
    iteration that failed, then fails the backfill; a run that failed fails its partitions)."""
    # The runs wait in the queue rather than execute inside the iteration's event loop.
    ref = instance.get_ref()._replace(
        run_coordinator_data=QUEUED_RUN_COORDINATOR, run_launcher_data=IN_PROCESS_RUN_LAUNCHER
    )
    origin = InProcessCodeLocationOrigin(
        LoadableTargetOrigin(module_name=CODE_LOCATION, working_directory=os.getcwd()),
        location_name=LOCATION_NAME,
    )
    with (
        dg.DagsterInstance.from_ref(ref) as driving,
        WorkspaceProcessContext(driving, InProcessWorkspaceLoadTarget(origin)) as workspace,
    ):

        def iterate(backfill_id: str) -> list[str]:
            backfill = driving.get_backfill(backfill_id)
            if backfill is None:
                raise LookupError(f"backfill {backfill_id} is not on this instance")
            iteration = execute_backfill_iteration_with_instigation_logger(
                backfill, LOGGER, workspace, driving
            )
            errors = [
                f"backfill iteration failed (Dagster retries it, then fails the backfill): {error.message}"
                for error in iteration
                if error is not None
            ]
            queued = dg.RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}, statuses=[dg.DagsterRunStatus.QUEUED])
            for run in reversed(driving.get_runs(queued)):  # oldest first
                try:
                    driving.launch_run(run.run_id, workspace.create_request_context())
                except Exception as exc:  # the run is marked failed, with the error, in the UI
                    errors.append(f"run {run.run_id[:8]} could not start: {exc}")
                failures = driving.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_FAILURE)
                if interrupted(entry.dagster_event for entry in failures):
                    # Dagster ended the run and swallowed the signal: the command stops too.
                    raise KeyboardInterrupt
            return [error.strip().splitlines()[0] for error in errors]

        yield iterate

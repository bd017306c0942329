"""Evaluate a range of dates as one Dagster asset backfill of every evaluation asset (the
chosen models' partitions), run in dependency order by Dagster's backfill iteration, as a
backfill from the UI is: the daemon's, or, when no daemon serves the instance, the command's own
(`backfill_driver`). The daemon looks every 30 s, a dependency level a look, and starts each run
as a process loading Dagster and the code location again: minutes for a few dates.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import dagster as dg

from eval_pipeline.defs.graph import MATERIALIZABLE
from eval_pipeline.defs.partitions import date_partitions, model_date_key, sync_model_partitions
from eval_pipeline.orchestration.stages import interrupted
from eval_pipeline.runtime.dagster_private import (
    IN_PROCESS_RUN_LAUNCHER,
    QUEUED_RUN_COORDINATOR,
    AssetGraphSubset,
    AssetKeyPartitionKey,
    BaseAssetGraph,
    BulkActionStatus,
    InProcessCodeLocationOrigin,
    InProcessWorkspaceLoadTarget,
    LoadableTargetOrigin,
    PartitionBackfill,
    WorkspaceProcessContext,
    execute_backfill_iteration_with_instigation_logger,
    make_new_backfill_id,
)
from eval_pipeline.runtime.run_monitor import owner_gone, owner_label

BACKFILL_TAG = "eval_pipeline/backfill"
# Every status but those of a backfill still going on (FAILING: its runs are being canceled).
ENDED = set(BulkActionStatus) - {BulkActionStatus.REQUESTED, BulkActionStatus.CANCELING}
BACKFILL_ID_TAG = "dagster/backfill"  # Dagster's, on each run of a backfill
# Dagster counts a daemon alive for 30 minutes after its last heartbeat (one every 30 s); here
# for three, so a command relying on a killed one carries its backfill on a minute and a half on.
FRESH_S = 90.0
CODE_LOCATION = "eval_pipeline.definitions"
# `dg dev`'s name for it ([tool.dg.project] code_location_name): the UI re-executes runs there.
LOCATION_NAME = "eval_pipeline"
LOGGER = logging.getLogger(__name__)
# The iteration's log lines are the backfill's (the UI shows them); errors come back as values.
LOGGER.addHandler(logging.NullHandler())
LOGGER.propagate = False


def daemon_alive(instance: dg.DagsterInstance) -> bool:
    """Whether a daemon that runs backfills (`dg dev`, a deployment's) beat within `FRESH_S`."""
    heartbeat = instance.get_daemon_heartbeats().get("BACKFILL")
    return heartbeat is not None and time.time() - heartbeat.timestamp < FRESH_S


def backfill_targets(dates: Sequence[str], models: Sequence[str]) -> set[AssetKeyPartitionKey]:
    """Every evaluation asset partition of `dates`: date assets once, model x date ones per model."""
    targets: set[AssetKeyPartitionKey] = set()
    for asset in MATERIALIZABLE:
        for date in dates:
            if asset.partitions_def == date_partitions:
                targets.add(AssetKeyPartitionKey(asset.key, date))
            else:
                targets |= {AssetKeyPartitionKey(asset.key, model_date_key(m, date)) for m in models}
    return targets


def submit_backfill(
    instance: dg.DagsterInstance,
    graph: BaseAssetGraph,  # type: ignore[type-arg]
    dates: Sequence[str],
    models: Sequence[str],
    tags: Mapping[str, str] | None = None,
    run_config: Mapping[str, object] | None = None,
) -> str:
    """Add the backfill over the code location's asset `graph` to the instance (a daemon, or the
    command, carries it out) and return its id. `tags` go on the backfill and on each of its runs,
    `run_config` on each run."""
    sync_model_partitions(instance, models)
    subset = AssetGraphSubset.from_asset_partition_set(backfill_targets(dates, models), graph)
    backfill_id = make_new_backfill_id()
    span = dates[0] if len(dates) == 1 else f"{dates[0]}..{dates[-1]}"
    instance.add_backfill(
        PartitionBackfill.from_asset_graph_subset(
            backfill_id=backfill_id,
            backfill_timestamp=time.time(),
            tags={BACKFILL_TAG: span, "launched_by": "eval-pipeline backfill", **(tags or {})},
            dynamic_partitions_store=instance,
            asset_graph_subset=subset,
            title=f"evaluate {span}",
            description=f"models: {', '.join(models)}",
            run_config=run_config,
        )
    )
    return backfill_id


@dataclass(frozen=True)
class Progress:
    status: BulkActionStatus
    done: int  # target partitions materialised since the backfill began
    total: int
    failed_runs: list[str]  # "run id: job" of the backfill's failed runs

    @property
    def ended(self) -> bool:
        return self.status in ENDED


def progress(instance: dg.DagsterInstance, backfill_id: str, total: int) -> Progress:
    backfill = instance.get_backfill(backfill_id)
    if backfill is None:
        raise LookupError(f"backfill {backfill_id} is not on this instance")
    data = backfill.asset_backfill_data
    done = data.materialized_subset.num_partitions_and_non_partitioned_assets if data else 0
    runs = instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}))
    failed = [f"{r.run_id[:8]}: {r.job_name}" for r in runs if r.status is dg.DagsterRunStatus.FAILURE]
    return Progress(backfill.status, done, total, failed)


def tag_backfill(instance: dg.DagsterInstance, backfill_id: str, tags: Mapping[str, str]) -> None:
    """Add `tags` to the backfill: its runs submitted from now on carry them too."""
    backfill = instance.get_backfill(backfill_id)
    if backfill is not None:
        instance.update_backfill(backfill._replace(tags={**backfill.tags, **tags}))


def end_abandoned_backfills(instance: dg.DagsterInstance) -> list[str]:
    """Cancel the unfinished backfills whose carrying command (its owner tags) is gone, and their
    queued runs, so a daemon starting later does not go on beside the next command's backfill
    (their started runs are `end_orphaned_runs`'s). One line each."""
    lines = []
    for status in (BulkActionStatus.REQUESTED, BulkActionStatus.CANCELING):
        for backfill in instance.get_backfills(status=status):
            if BACKFILL_TAG not in backfill.tags or not owner_gone(backfill.tags):
                continue
            owner = owner_label(backfill.tags)
            queued = cancel_backfill(
                instance, backfill.backfill_id, f"its backfill's command ({owner}) is gone"
            )
            span = backfill.tags[BACKFILL_TAG]
            lines.append(
                f"backfill {backfill.backfill_id} ({span}): the command that ran it ({owner}) is gone; "
                f"canceled by eval-pipeline, {queued} queued run(s) canceled"
            )
    return lines


def cancel_backfill(instance: dg.DagsterInstance, backfill_id: str, reason: str) -> int:
    """Mark the backfill canceled and cancel its queued runs, giving `reason`; how many runs."""
    backfill = instance.get_backfill(backfill_id)
    if backfill is not None:
        instance.update_backfill(
            backfill._replace(status=BulkActionStatus.CANCELED, backfill_end_timestamp=time.time())
        )
    queued = instance.get_runs(
        dg.RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}, statuses=[dg.DagsterRunStatus.QUEUED])
    )
    for run in queued:
        instance.report_run_canceled(run, reason)
    return len(queued)


@contextmanager
def backfill_driver(instance: dg.DagsterInstance) -> Iterator[Callable[[str], list[str]]]:
    """A function carrying out one iteration of a backfill on `instance`'s storage (the daemon's
    own: Dagster decides what to submit and when it has ended) and executing the runs it queued
    in this process; it returns the errors, one line each (Dagster retries an iteration that
    failed, then fails the backfill; a run that failed fails its partitions). The backfill, runs
    and logs are those the daemon makes; the runs name the command as their owner
    (runtime/run_monitor.py), so a killed command's are ended by the next."""
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

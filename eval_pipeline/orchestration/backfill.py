"""Evaluate a range of dates as one Dagster asset backfill.

The backfill targets every evaluation asset for the dates (and the chosen models' model x date
partitions); Dagster's backfill daemon runs them in dependency order, so each date's diff follows
the reports it compares and each comparison follows the date's reports. The same backfill can be
launched from the UI by selecting the assets and a date range.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from eval_pipeline.defs.graph import MATERIALIZABLE
from eval_pipeline.defs.partitions import date_partitions, model_date_key, sync_model_partitions
from eval_pipeline.orchestration.child_process import SUPERVISOR, die_with_parent
from eval_pipeline.runtime.dagster_private import (
    IN_PROGRESS_RUN_STATUSES,
    AssetGraphSubset,
    AssetKeyPartitionKey,
    BaseAssetGraph,
    BulkActionStatus,
    PartitionBackfill,
    get_daemon_statuses,
    make_new_backfill_id,
)

BACKFILL_TAG = "eval_pipeline/backfill"
ENDED = {
    BulkActionStatus.COMPLETED,
    BulkActionStatus.COMPLETED_SUCCESS,
    BulkActionStatus.COMPLETED_FAILED,
    BulkActionStatus.FAILED,
    BulkActionStatus.CANCELED,
    BulkActionStatus.FAILING,
}
DAEMON_STOP_GRACE_S = 20.0
RUNS_GRACE_S = 180.0  # for runs the daemon's automation launched meanwhile


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
) -> str:
    """Add the backfill over the code location's asset `graph` to the instance (the daemon picks
    it up) and return its id."""
    sync_model_partitions(instance, models)
    subset = AssetGraphSubset.from_asset_partition_set(backfill_targets(dates, models), graph)
    backfill_id = make_new_backfill_id()
    span = dates[0] if len(dates) == 1 else f"{dates[0]}..{dates[-1]}"
    instance.add_backfill(
        PartitionBackfill.from_asset_graph_subset(
            backfill_id=backfill_id,
            backfill_timestamp=time.time(),
            tags={BACKFILL_TAG: span, "launched_by": "eval-pipeline backfill"},
            dynamic_partitions_store=instance,
            asset_graph_subset=subset,
            title=f"evaluate {span}",
            description=f"models: {', '.join(models)}",
            run_config=None,
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
    runs = instance.get_runs(dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
    failed = [f"{r.run_id[:8]}: {r.job_name}" for r in runs if r.status is dg.DagsterRunStatus.FAILURE]
    return Progress(backfill.status, done, total, failed)


def daemon_running(instance: dg.DagsterInstance) -> bool:
    """Whether a daemon serving this instance's backfills has a recent heartbeat (e.g. `dg dev`)."""
    status = get_daemon_statuses(instance, ["BACKFILL"], ignore_errors=True)["BACKFILL"]
    return bool(status.healthy)


@contextmanager
def daemon(instance: dg.DagsterInstance, log: Path) -> Iterator[subprocess.Popen[bytes] | None]:
    """A `dagster-daemon` for this project while the block runs, unless one is running already.
    It loads this code location from the working directory, as `dg dev` would."""
    if daemon_running(instance):
        yield None
        return
    command = [
        *SUPERVISOR,
        str(Path(sys.executable).with_name("dagster-daemon")),
        "run",
        "-m",
        "eval_pipeline.definitions",
    ]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        process = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            # A supervisor leading its own group: stopped, it stops the daemon and every run it
            # launched, also when this process is killed (die_with_parent).
            start_new_session=True,
            preexec_fn=die_with_parent(),
        )
        try:
            yield process
        finally:
            _wait_for_runs(instance, time.monotonic() + RUNS_GRACE_S)
            _stop(process)


def _wait_for_runs(instance: dg.DagsterInstance, deadline: float) -> None:
    """Let runs the daemon launched meanwhile (e.g. the automation on today) finish first."""
    in_progress = dg.RunsFilter(statuses=[*IN_PROGRESS_RUN_STATUSES])
    while instance.get_runs_count(in_progress) and time.monotonic() < deadline:
        time.sleep(1.0)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=DAEMON_STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

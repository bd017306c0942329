"""A live daemon told from a heartbeat left by a dead one, and the backfills of a killed command
ended with a reason, on a test instance: heartbeats are written as the daemon writes them, and
a process that has ended stands for a killed command."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator

import dagster as dg
import pytest
from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
from dagster._core.remote_origin import RegisteredCodeLocationOrigin, RemoteRepositoryOrigin
from dagster._core.test_utils import create_run_for_test
from dagster._daemon.types import DaemonHeartbeat

from eval_pipeline.orchestration.backfill import (
    BACKFILL_ID_TAG,
    BACKFILL_TAG,
    FRESH_S,
    daemon_alive,
    end_abandoned_backfills,
)
from eval_pipeline.runtime.run_monitor import owner_tags


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as made:
        yield made


def _gone_pid() -> int:
    """The pid of a process that has ended, as a killed command leaves."""
    ended = subprocess.Popen(["true"])
    ended.wait()
    return ended.pid


def _beat(instance: dg.DagsterInstance, at: float) -> None:
    instance.add_daemon_heartbeat(DaemonHeartbeat(at, "BACKFILL", "daemon-id"))


def test_a_daemon_counts_while_its_heartbeats_are_fresh(instance: dg.DagsterInstance) -> None:
    now = time.time()
    assert not daemon_alive(instance)  # none ever ran
    _beat(instance, now - 120)
    assert not daemon_alive(instance)  # 2 minutes without a heartbeat: stopped (Dagster says 30)
    _beat(instance, now - FRESH_S / 3)
    assert daemon_alive(instance)


def _backfill(instance: dg.DagsterInstance, backfill_id: str, tags: dict[str, str]) -> None:
    instance.add_backfill(
        PartitionBackfill(
            backfill_id=backfill_id,
            status=BulkActionStatus.REQUESTED,
            from_failure=False,
            tags={BACKFILL_TAG: "2026-11-20", **tags},
            backfill_timestamp=time.time(),
            serialized_asset_backfill_data=None,
            asset_selection=[dg.AssetKey("a")],
            title=None,
            description=None,
        )
    )


def test_the_backfill_of_a_killed_command_is_canceled_and_its_queued_runs_ended(
    instance: dg.DagsterInstance,
) -> None:
    killed = {**owner_tags(), "eval_pipeline/owner_pid": str(_gone_pid())}
    _backfill(instance, "killed", killed)
    _backfill(instance, "running", owner_tags())  # its command is this test: alive
    _backfill(instance, "in_dg_dev", {})  # a daemon of someone else's runs it: not ours to end
    # A run the killed command had queued (Dagster's own helper: a queued run needs a code origin).
    origin = RemoteRepositoryOrigin(RegisteredCodeLocationOrigin("location"), "repository")
    queued = create_run_for_test(
        instance,
        status=dg.DagsterRunStatus.QUEUED,
        tags={BACKFILL_ID_TAG: "killed", **killed},
        remote_job_origin=origin.get_job_origin("job"),
    )
    lines = end_abandoned_backfills(instance)
    assert lines == [
        f"backfill killed (2026-11-20): the command that ran it (pid {killed['eval_pipeline/owner_pid']} "
        f"on {socket.gethostname()}) is gone; canceled by eval-pipeline, 1 queued run(s) canceled"
    ]
    statuses = {b.backfill_id: b.status for b in instance.get_backfills()}
    assert statuses == {
        "killed": BulkActionStatus.CANCELED,
        "running": BulkActionStatus.REQUESTED,
        "in_dg_dev": BulkActionStatus.REQUESTED,
    }
    run = instance.get_run_by_id(queued.run_id)
    assert run is not None and run.status is dg.DagsterRunStatus.CANCELED
    assert end_abandoned_backfills(instance) == []  # once

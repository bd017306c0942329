"""Ending runs whose process is gone, in process on a temporary instance: which runs are ended
(dead owner here) and which are left alone (live owner, another host, no owner), a run that
waits for a slot held by a dead run says so, then takes the slot, and a run launched without an
owner (by the daemon) is owned by the process that claims a slot for it."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext
from dagster._core.storage.dagster_run import DagsterRun

from eval_pipeline.runtime.run_monitor import (
    OWNER_HOST_TAG,
    OWNER_PID_TAG,
    OWNER_START_TAG,
    end_orphaned_runs,
    holder_notice,
    owner_tags,
    wait_for_slot,
)

POOL = "provider"


@pytest.fixture
def instance(tmp_path: Path) -> dg.DagsterInstance:
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    made = dg.DagsterInstance.from_config(str(tmp_path))
    made.event_log_storage.set_concurrency_slots(POOL, 1)
    return made


def _dead_owner() -> dict[str, str]:
    """Owner tags of a process that has ended (and been reaped)."""
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return {**owner_tags(), OWNER_PID_TAG: str(done.pid)}


def _run(instance: dg.DagsterInstance, tags: dict[str, str], slot: bool = True) -> str:
    run = instance.add_run(DagsterRun(job_name="some_job", status=dg.DagsterRunStatus.STARTED, tags=tags))
    if slot:
        instance.event_log_storage.claim_concurrency_slot(POOL, run.run_id, "step")
    return run.run_id


def _status(instance: dg.DagsterInstance, run_id: str) -> dg.DagsterRunStatus:
    run = instance.get_run_by_id(run_id)
    assert run is not None
    return run.status


def test_only_runs_whose_process_is_gone_here_are_ended(instance: dg.DagsterInstance) -> None:
    gone = _dead_owner()
    dead = _run(instance, gone)
    reused = _run(instance, {**owner_tags(), OWNER_START_TAG: "1"}, slot=False)  # our pid, not us
    alive = _run(instance, owner_tags(), slot=False)
    elsewhere = _run(instance, {**_dead_owner(), OWNER_HOST_TAG: f"not-{socket.gethostname()}"}, slot=False)
    launched = _run(instance, {"dagster/backfill": "abc"}, slot=False)

    lines = end_orphaned_runs(instance)

    here = socket.gethostname()
    assert sorted(lines) == sorted(
        f"run {run_id[:8]} (some_job): its process (pid {pid} on {here}) is gone; "
        "marked ended by eval-pipeline, its pool slots freed"
        for run_id, pid in [(dead, gone[OWNER_PID_TAG]), (reused, owner_tags()[OWNER_PID_TAG])]
    )
    assert _status(instance, dead) is dg.DagsterRunStatus.FAILURE
    assert _status(instance, reused) is dg.DagsterRunStatus.FAILURE
    for untouched in (alive, elsewhere, launched):
        assert _status(instance, untouched) is dg.DagsterRunStatus.STARTED
    assert instance.event_log_storage.get_concurrency_info(POOL).active_slot_count == 0
    assert end_orphaned_runs(instance) == []  # once


def test_a_waiting_run_names_the_holder_and_takes_the_slot_once_its_process_is_gone(
    instance: dg.DagsterInstance, capsys: pytest.CaptureFixture[str]
) -> None:
    gone = _dead_owner()
    holder = _run(instance, gone)

    @dg.asset  # the context annotation must be a real type: no postponed annotations here
    def calls_the_provider(context: dg.AssetExecutionContext) -> None:
        with InstanceConcurrencyContext(context.instance, context.run) as slots:
            wait_for_slot(context, slots, POOL, "calls_the_provider")
            slots.free_step("calls_the_provider")

    result = dg.materialize([calls_the_provider], instance=instance)

    assert result.success
    err = capsys.readouterr().err
    assert f"waiting for a slot of the '{POOL}' pool: run {holder[:8]} (some_job), pid " in err
    assert f"kill {gone[OWNER_PID_TAG]}" in err
    assert f"run {holder[:8]} (some_job): its process" in err and "is gone" in err
    assert _status(instance, holder) is dg.DagsterRunStatus.FAILURE
    logged = [e.message for e in instance.all_logs(result.run_id)]
    assert any(f"waiting for a slot of the '{POOL}' pool" in m for m in logged)


def test_a_run_launched_without_an_owner_is_owned_by_the_process_that_claims_a_slot(
    instance: dg.DagsterInstance,
) -> None:
    @dg.asset
    def holds_a_slot(context: dg.AssetExecutionContext) -> None:
        with InstanceConcurrencyContext(context.instance, context.run) as slots:
            wait_for_slot(context, slots, POOL, "holds_a_slot")
            slots.free_step("holds_a_slot")

    # As the daemon launches a backfill's run: no owner tags.
    launched = dg.materialize([holds_a_slot], instance=instance, tags={"dagster/backfill": "abc"})
    run = instance.get_run_by_id(launched.run_id)
    assert run is not None and {tag: run.tags.get(tag) for tag in owner_tags()} == owner_tags()
    notice = holder_notice(instance, POOL, run.run_id)
    assert f"pid {os.getpid()} on {socket.gethostname()}, holds it" in notice
    assert f"kill {os.getpid()}" in notice
    # A run that names its owner (the CLI's) keeps it.
    cli_owner = {**owner_tags(), OWNER_PID_TAG: "1"}
    own = dg.materialize([holds_a_slot], instance=instance, tags=cli_owner)
    kept = instance.get_run_by_id(own.run_id)
    assert kept is not None and kept.tags[OWNER_PID_TAG] == "1"

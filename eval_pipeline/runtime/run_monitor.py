"""Runs whose process is gone: marked failed, their pool slots freed; a run waiting for a slot
says which run holds it and how to free it (stderr, as the CLI's console logger is quiet, and
its event log), ending holders whose process is gone, so a killed run never blocks the next.

A run executed in process (the CLI, a parallel worker) and killed with SIGKILL stays STARTED
with its pool slots claimed, and every later run on that provider would wait forever; Dagster's
run monitoring watches only the daemon's runs. So each run records its owner (pid, host and the
process's start time: a pid is reused, a pid with its start time is not), and before launching
anything the CLI fails the runs whose owner is gone. Another host's runs are left alone: from
here they cannot be told apart from live ones.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Collection, Mapping
from pathlib import Path

import dagster as dg

from eval_pipeline.runtime.dagster_private import InstanceConcurrencyContext

OWNER_PID_TAG = "eval_pipeline/owner_pid"
OWNER_HOST_TAG = "eval_pipeline/owner_host"
OWNER_START_TAG = "eval_pipeline/owner_started"
# Dagster's monitoring of the daemon's runs: one that never starts or never finishes cancelling
# is failed, and slots a finished run still holds are freed.
RUN_MONITORING_YAML = """run_monitoring:
  enabled: true
  start_timeout_seconds: 180
  cancel_timeout_seconds: 180
  max_resume_run_attempts: 0
  poll_interval_seconds: 30
  free_slots_after_run_end_seconds: 30
"""
POLL_S = 0.25
CHECK_HOLDERS_EVERY = 8  # polls: a liveness check costs a few queries, a claim one
# NOT_STARTED too: a process killed between creating its run and starting it leaves that.
UNFINISHED = [
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def process_start(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot, from /proc), or None when no such
    process runs (a zombie has finished running). Where /proc is missing, "?" for any live pid."""
    try:
        # The command name (field 2) may hold spaces and parentheses: fields count from its end.
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return "?"
    return None if fields[0] == "Z" else fields[19]


def owner_tags() -> dict[str, str]:
    """The tags naming this process as a run's owner."""
    pid = os.getpid()
    return {
        OWNER_PID_TAG: str(pid),
        OWNER_HOST_TAG: socket.gethostname(),
        OWNER_START_TAG: process_start(pid) or "?",
    }


def own_run(instance: dg.DagsterInstance, run: dg.DagsterRun) -> None:
    """Name this process as `run`'s owner when nothing does yet (a run the daemon launched, which
    executes in one process of its own): then a run waiting for its slot can name that process,
    and `end_orphaned_runs` can tell when it is gone."""
    if OWNER_PID_TAG not in run.tags:
        instance.add_run_tags(run.run_id, owner_tags())


def owner_gone(tags: Mapping[str, str]) -> bool:
    """Whether the run's owning process surely no longer runs (False when unknown)."""
    if OWNER_PID_TAG not in tags or tags.get(OWNER_HOST_TAG) != socket.gethostname():
        return False
    started = process_start(int(tags[OWNER_PID_TAG]))
    return started is None or started not in ("?", tags.get(OWNER_START_TAG))


def owner_label(tags: Mapping[str, str]) -> str:
    """'pid N on HOST', or what launched the run when it names no owner."""
    if OWNER_PID_TAG in tags:
        return f"pid {tags[OWNER_PID_TAG]} on {tags.get(OWNER_HOST_TAG, '?')}"
    return f"launched by {tags.get('launched_by') or tags.get('dagster/backfill') or 'Dagster'}"


def run_label(run: dg.DagsterRun) -> str:
    partition = run.tags.get("dagster/partition")
    return f"run {run.run_id[:8]} ({run.job_name}{f', {partition}' if partition else ''})"


def _end(instance: dg.DagsterInstance, run: dg.DagsterRun) -> str:
    reason = f"its process ({owner_label(run.tags)}) is gone; marked ended by eval-pipeline"
    if run.status is dg.DagsterRunStatus.CANCELING:
        instance.report_run_canceled(run, reason)
    else:
        instance.report_run_failed(run, reason)
    return f"{run_label(run)}: {reason}, its pool slots freed"


def end_orphaned_runs(instance: dg.DagsterInstance, run_ids: Collection[str] | None = None) -> list[str]:
    """End the unfinished runs (of `run_ids`, or all) whose owning process is gone, FAILED (or
    CANCELED when a cancel was asked), and free the pool slots of those and of finished runs;
    one line for each run ended."""
    ids = None if run_ids is None else list(run_ids)
    if ids == []:
        return []
    runs = instance.get_runs(dg.RunsFilter(run_ids=ids, statuses=UNFINISHED))
    ended = [_end(instance, run) for run in runs if owner_gone(run.tags)]
    storage = instance.event_log_storage  # the slots of those ended now too: they are finished
    if storage.supports_global_concurrency_limits:
        for run_id in storage.get_concurrency_run_ids() if ids is None else ids:
            held = instance.get_run_by_id(run_id)
            if held is None or held.is_finished:
                storage.free_concurrency_slots_for_run(run_id)
    return ended


def holder_notice(instance: dg.DagsterInstance, pool: str, run_id: str) -> str:
    """What a waiting run says about the run holding a slot of `pool`."""
    run = instance.get_run_by_id(run_id)
    if run is None:
        return f"waiting for a slot of the '{pool}' pool, held by run {run_id[:8]} (no longer recorded)"
    how = (
        f"stop its process (kill {run.tags[OWNER_PID_TAG]}) and this run takes the slot"
        if OWNER_PID_TAG in run.tags
        else f"terminate it in the UI (Runs > {run.run_id[:8]} > Terminate)"
    )
    return (
        f"waiting for a slot of the '{pool}' pool: {run_label(run)}, {owner_label(run.tags)}, holds it. "
        f"It is freed when that run ends; to free it now, {how}; "
        f"to let more runs in at once: dagster instance concurrency set {pool} N"
    )


def wait_for_slot(
    context: dg.AssetExecutionContext, slots: InstanceConcurrencyContext, pool: str, claim: str
) -> None:
    """Claim a slot of `pool` for step `claim`, waiting as long as it takes, never silently."""
    instance = context.instance
    own_run(instance, context.run)  # before holding a slot, so whoever waits for it can name us
    told: set[str] = set()
    polls = 0
    while not slots.claim(pool, claim):
        if polls % CHECK_HOLDERS_EVERY == 0:
            holders = instance.event_log_storage.get_concurrency_info(pool).active_run_ids - {context.run_id}
            for line in end_orphaned_runs(instance, holders):
                _say(context, line)
            for run_id in sorted(holders - told):
                _say(context, holder_notice(instance, pool, run_id))
            told |= holders
        polls += 1
        time.sleep(POLL_S)


def _say(context: dg.AssetExecutionContext, line: str) -> None:
    context.log.info(line)
    print(f"  {line}", file=sys.stderr, flush=True)

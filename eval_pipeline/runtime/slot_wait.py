"""Waiting for a pool slot, out loud: which run holds it and how to free it.

A waiting run says so on stderr (the CLI's console logger is quiet) and in its event log, once
per holder, and ends holders whose process is gone (run_monitor): a killed run never blocks.
"""

from __future__ import annotations

import sys
import time

import dagster as dg

from eval_pipeline.runtime.dagster_private import InstanceConcurrencyContext
from eval_pipeline.runtime.run_monitor import (
    OWNER_PID_TAG,
    end_orphaned_runs,
    own_run,
    owner_label,
    run_label,
)

POLL_S = 0.25
CHECK_HOLDERS_EVERY = 8  # polls: a liveness check costs a few queries, a claim one


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

"""Where a run's steps execute.

In the run's own process by default (a process per step costs seconds each). A deployment that
names a Celery broker in `EVAL_PIPELINE_CELERY_BROKER` (e.g. `redis://broker:6379/0`; results
backend `EVAL_PIPELINE_CELERY_BACKEND`, default the broker) gets Dagster's Celery executor for
the runs the daemon or the UI launch: each step a task for any `dagster-celery` worker, which
then needs the same instance (Postgres), object store (`EVAL_PIPELINE_OUTPUTS_URI`) and
`EVAL_PIPELINE_*` settings. The instance's provider pools bound API calls across workers.
`run`'s own runs stay in process.
"""

from __future__ import annotations

import os

import dagster as dg

CELERY_BROKER_ENV = "EVAL_PIPELINE_CELERY_BROKER"
CELERY_BACKEND_ENV = "EVAL_PIPELINE_CELERY_BACKEND"


def project_executor() -> dg.ExecutorDefinition:
    """Celery's executor when the deployment names a broker, else the in-process one."""
    if not os.environ.get(CELERY_BROKER_ENV):
        return dg.in_process_executor
    from dagster_celery import celery_executor

    backend = CELERY_BACKEND_ENV if os.environ.get(CELERY_BACKEND_ENV) else CELERY_BROKER_ENV
    # Read by Dagster from the environment where the run executes, never copied into run config.
    executor: dg.ExecutorDefinition = celery_executor.configured(
        {"broker": {"env": CELERY_BROKER_ENV}, "backend": {"env": backend}}
    )
    return executor

"""Where a run's steps execute.

By default in the run's own process: a process per step costs seconds each, and one machine runs
the whole evaluation. A deployment that names a Celery broker in `EVAL_PIPELINE_CELERY_BROKER`
(e.g. `redis://broker:6379/0`) gets Dagster's Celery executor instead: every step of a run the
daemon or the UI launches (backfills, automation, launches) is a task on the broker, executed by
whichever `dagster-celery` worker takes it. Every worker then needs the same instance
(Postgres: deploy/dagster.yaml), the same object store for the values steps hand each other
(`EVAL_PIPELINE_OUTPUTS_URI`) and the project's other `EVAL_PIPELINE_*` settings. The provider
pools are the instance's, so they bound API calls across workers as across runs.
`EVAL_PIPELINE_CELERY_BACKEND` names the results backend; default: the broker. The command
line's own runs (`run`) stay in process.
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

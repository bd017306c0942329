"""A date's model stages at once: each model's run in a worker process of its own on the
project's instance, as real Dagster runs (same job, tags and UI as a sequential run).

Processes, not threads: `execute_in_process` holds process-wide state (logging, `os.environ`,
signals) and a native library (onnxruntime) may take a process down; a dead worker is its
model's failure only. Forkserver: workers fork from a server that imported Dagster, the graph
and the API clients once (while the shared stage runs), without copying a parent's threads
mid-lock; the server keeps the environment and working directory it started with, so each
worker is handed the parent's current ones. How many call one provider at once is the provider
pools' business (defs/pools.py).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any

import dagster as dg

from eval_pipeline.defs.automation import model_job
from eval_pipeline.defs.partitions import model_date_key
from eval_pipeline.orchestration.stages import StageOutcome, evaluation_definitions, run_stage
from eval_pipeline.runtime.dagster_private import InstanceRef

CONTEXT = multiprocessing.get_context("forkserver")
# The API clients too: models run at once by default only where they wait on remote services
# (cli/run.py), and importing anthropic's SDK is slow enough not to pay it per worker.
CONTEXT.set_forkserver_preload(
    [__name__, "eval_pipeline.providers.claude_rerank", "eval_pipeline.providers.voyage"]
)
# A worker has sent its outcome and is only closing down: long enough for that, then stopped.
EXIT_GRACE_S = 30.0

# A resource by its class and fields: Dagster's resource objects do not survive pickling.
ResourceRecipe = tuple[type[Any], dict[str, Any]]


@dataclass(frozen=True)
class _Job:
    """All a worker needs to evaluate one model on one date."""

    model: str
    date: str
    resources: dict[str, ResourceRecipe]
    instance: InstanceRef
    environ: dict[str, str]
    cwd: str  # relative paths (--kb kb, storage/) resolve as in the parent
    tags: dict[str, str]  # the run's, beside the stage's own


def uses_workers(models: Sequence[str], parallel: int, instance: dg.DagsterInstance) -> bool:
    """Worker processes only when two models may run at once, on an instance they can open."""
    return parallel > 1 and len(models) > 1 and not instance.is_ephemeral


def run_models(
    date: str,
    models: Sequence[str],
    resources: dict[str, object],
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    parallel: int,
    on_start: Callable[[str], None],
    on_done: Callable[[StageOutcome], None],
    tags: Mapping[str, str] | None = None,
) -> list[StageOutcome]:
    """Each model's stage (report, gate, regression diff), outcomes in the order of `models`."""
    if not uses_workers(models, parallel, instance):
        outcomes = []
        for model in models:
            on_start(model)
            key = model_date_key(model, date)
            outcomes.append(run_stage(model, model_job.name, key, defs, instance, tags))
            on_done(outcomes[-1])
        return outcomes
    recipes = {name: _recipe(resource) for name, resource in resources.items()}
    ref = instance.get_ref()
    jobs = [
        _Job(model, date, recipes, ref, dict(os.environ), os.getcwd(), dict(tags or {})) for model in models
    ]
    done = _run_jobs(jobs, parallel, on_start, on_done)
    return [done[model] for model in models]


def _recipe(resource: object) -> ResourceRecipe:
    fields = getattr(type(resource), "model_fields", None)
    if fields is None:
        raise TypeError(f"resource {resource!r} is not a configurable resource: it cannot go to a worker")
    return type(resource), {name: getattr(resource, name) for name in fields}


def _run_jobs(
    jobs: list[_Job],
    parallel: int,
    on_start: Callable[[str], None],
    on_done: Callable[[StageOutcome], None],
) -> dict[str, StageOutcome]:
    waiting = list(jobs)
    running: dict[Connection, tuple[str, BaseProcess]] = {}
    done: dict[str, StageOutcome] = {}
    try:
        while waiting or running:
            while waiting and len(running) < parallel:
                job = waiting.pop(0)
                receive, send = CONTEXT.Pipe(duplex=False)
                worker = CONTEXT.Process(target=_evaluate, args=(job, send), name=f"model {job.model}")
                on_start(job.model)
                worker.start()
                send.close()  # the worker's end: once it exits, `receive` reads EOF, never hangs
                running[receive] = (job.model, worker)
            for ready in wait(list(running)):
                assert isinstance(ready, Connection)
                model, finished = running.pop(ready)
                done[model] = _outcome(model, ready, finished)
                on_done(done[model])
    finally:
        for _, orphan in running.values():  # interrupted: no orphan keeps a run going
            orphan.terminate()
            orphan.join()
    return done


def _outcome(model: str, receive: Connection, worker: BaseProcess) -> StageOutcome:
    try:
        outcome: StageOutcome = receive.recv()
    except EOFError:
        worker.join()
        reason = f"ended (exit code {worker.exitcode}) before its run reported"
        return StageOutcome(model, False, [f"worker process: {reason}"], [])
    finally:
        receive.close()
    worker.join(EXIT_GRACE_S)
    if worker.is_alive():
        worker.kill()
        worker.join()
    return outcome


def _evaluate(job: _Job, send: Connection) -> None:
    """In the worker: one model's run on the shared instance; the outcome goes back through `send`."""
    os.environ.clear()
    os.environ.update(job.environ)
    os.chdir(job.cwd)
    try:
        defs = evaluation_definitions({name: cls(**fields) for name, (cls, fields) in job.resources.items()})
        with dg.DagsterInstance.from_ref(job.instance) as instance:
            key = model_date_key(job.model, job.date)
            outcome = run_stage(job.model, model_job.name, key, defs, instance, job.tags)
    except Exception as exc:  # reported as the model's failure, like a failed step, not a traceback
        outcome = StageOutcome(job.model, False, [f"worker process: {type(exc).__name__}: {exc}"], [])
    except KeyboardInterrupt:  # stopped with the command, its run ended by Dagster: no traceback
        return
    send.send(outcome)
    send.close()

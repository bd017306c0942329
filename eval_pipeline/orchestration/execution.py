"""Materialise the graph for the CLI, in process, on the project's Dagster instance (the one
`dg dev` uses, so every CLI run shows in the UI)."""

from __future__ import annotations

import multiprocessing.forkserver
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import cast

import dagster as dg
import yaml
from filelock import FileLock
from upath import UPath

from eval_pipeline.core.fileio import atomic_write_text
from eval_pipeline.defs.automation import comparison_job, date_job, rediff_job
from eval_pipeline.defs.partitions import model_date_key, sync_model_partitions
from eval_pipeline.defs.resources import StorageResource
from eval_pipeline.location import instance_home
from eval_pipeline.orchestration.instance_storage import STORAGE_CLASS, STORAGE_MODULE, storage_config
from eval_pipeline.orchestration.parallel import run_models, uses_workers
from eval_pipeline.orchestration.stages import StageOutcome, evaluation_definitions, run_stage
from eval_pipeline.providers.evaluation_index import next_evaluated_date
from eval_pipeline.runtime.run_monitor import RUN_MONITORING_YAML

LOCK_FILE = "instance.lock"
# INFO and up: debug lines (every IO-manager load and write) would crowd a run's stored events.
# One run at a time calls each API provider (defs/pools.py); the daemon's runs are monitored
# (runtime/run_monitor.py); no "what's new" popup over the UI (`nux`).
_SETTINGS = (
    "telemetry:\n  enabled: false\nnux:\n  enabled: false\npython_logs:\n  python_log_level: INFO\n"
    + "concurrency:\n  pools:\n    default_limit: 1\n"
    + RUN_MONITORING_YAML
)
# Earlier forms (the storage's folder read from $DAGSTER_HOME, ...) are brought up to date.
_ENV_STORAGE = (
    f"storage:\n  custom:\n    module: {STORAGE_MODULE}\n    class: {STORAGE_CLASS}\n"
    "    config:\n      base_dir:\n        env: DAGSTER_HOME\n"
)
_ENV_FORM = _SETTINGS.replace("concurrency:", _ENV_STORAGE + "concurrency:")
_BEFORE_NUX = _ENV_FORM.replace("nux:\n  enabled: false\n", "")
EARLIER_DEFAULTS = (
    "telemetry:\n  enabled: false\npython_logs:\n  python_log_level: INFO\n",
    _BEFORE_NUX.removesuffix(RUN_MONITORING_YAML).replace(
        STORAGE_MODULE, "eval_pipeline.defs.instance_storage"
    ),
    _BEFORE_NUX.removesuffix(RUN_MONITORING_YAML),
    _BEFORE_NUX,
    _ENV_FORM,
)


def dagster_yaml(home: Path) -> str:
    """The project's instance settings for the instance in `home`."""
    storage = yaml.safe_dump({"storage": storage_config(str(home))}, sort_keys=False)
    return _SETTINGS.replace("concurrency:", storage + "concurrency:")


def _without_home(text: str) -> object:
    """dagster.yaml's settings with the storage's folder left out; None when it has none."""
    try:
        found = yaml.safe_load(text)
        found["storage"]["custom"]["config"]["base_dir"] = ""
    except (yaml.YAMLError, TypeError, KeyError):
        return None
    return found


def _write_config(home: Path) -> None:
    """The project's dagster.yaml in `home` (made if missing, or moved with its home), unless a
    team's own is there; call under the instance lock."""
    config, wanted = home / "dagster.yaml", dagster_yaml(home)
    text = config.read_text() if config.exists() else None
    # Ours, for any home (a moved one too), or an earlier default.
    if text is None or (
        text != wanted
        and (text in EARLIER_DEFAULTS or _without_home(text) == _without_home(dagster_yaml(Path())))
    ):
        atomic_write_text(config, wanted)


def instance_lock(home: Path) -> FileLock:
    """The lock under which the instance at `home` is set up: two commands started at once in a
    fresh checkout would both create its tables, and one would fail."""
    return FileLock(home / LOCK_FILE)


def prepare_home(home: Path) -> None:
    """The instance settings in `home` before `dg dev` (`make ui`) reads them, once, at start."""
    home.mkdir(parents=True, exist_ok=True)
    with instance_lock(home):
        _write_config(home)


def project_instance(home: Path | None = None) -> dg.DagsterInstance:
    """The instance under $DAGSTER_HOME, defaulting to the project's `.dagster_home`."""
    path = Path(home).resolve() if home is not None else instance_home()
    path.mkdir(parents=True, exist_ok=True)
    with instance_lock(path):
        _write_config(path)
        instance = dg.DagsterInstance.from_config(str(path))
        # Each storage creates its tables on first use: now, under the lock.
        instance.get_runs_count()
        instance.event_log_storage.get_concurrency_keys()
        if instance.schedule_storage is not None:
            instance.schedule_storage.all_instigator_state()
        return instance


def run_all(
    date: str,
    models: Sequence[str],
    resources: dict[str, object],
    instance: dg.DagsterInstance,
    on_stage: Callable[[str], None] = lambda _: None,
    *,
    parallel: int = 1,
    on_model_done: Callable[[StageOutcome], None] = lambda _: None,
    tags: Mapping[str, str] | None = None,
) -> list[StageOutcome]:
    """The date's shared assets once, then its models, up to `parallel` at once (each a run of
    its own), then the comparison of the date's models; stops early only on errors (a failed
    blocking check is a gate, and the later stages still run). `tags` go on every run."""
    sync_model_partitions(instance, models)
    if uses_workers(models, parallel, instance):
        multiprocessing.forkserver.ensure_running()  # now: its imports overlap the shared stage
    defs = evaluation_definitions(resources)
    on_stage(f"inputs, expectations and deterministic mechanisms for {date}")
    outcomes = [run_stage("shared", date_job.name, date, defs, instance, tags)]
    if outcomes[0].failures:
        return outcomes
    outcomes += run_models(
        date,
        models,
        resources,
        defs,
        instance,
        parallel,
        lambda model: on_stage(f"model {model}"),
        on_model_done,
        tags,
    )
    on_stage("model comparison")
    outcomes.append(run_stage("comparison", comparison_job.name, date, defs, instance, tags))
    storage = cast(StorageResource, resources["storage"])
    return outcomes + follow_later_dates(date, models, storage.results_root, defs, instance, on_stage, tags)


def follow_later_dates(
    last: str,
    models: Sequence[str],
    results_root: UPath,
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    on_stage: Callable[[str], None] = lambda _: None,
    tags: Mapping[str, str] | None = None,
) -> list[StageOutcome]:
    """After dates up to `last` were evaluated, each model's next later evaluation compares
    against them again: a backfill must not leave a later report saying "no baseline", or naming
    an older one, beside the evaluation it just made."""
    outcomes = []
    for model in models:
        later = next_evaluated_date(results_root, model, last)
        if later is not None:
            on_stage(f"regression diff of {model} @ {later}, now that {last} is evaluated")
            key = model_date_key(model, later)
            outcomes.append(run_stage(f"{model} @ {later}", rediff_job.name, key, defs, instance, tags))
    return outcomes

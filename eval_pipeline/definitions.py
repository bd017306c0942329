"""The Dagster code location (`dg dev`, `dg check defs`, the daemon and the CLI load this)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dagster as dg

from eval_pipeline.defs.calibration import CalibrationSettings
from eval_pipeline.defs.executor import project_executor
from eval_pipeline.defs.io_managers import JsonIOManagerFactory, ParquetIOManagerFactory
from eval_pipeline.defs.resources import (
    InputsResource,
    ProvidersResource,
    RunScopeResource,
    StorageResource,
)
from eval_pipeline.location import LocationPaths, location_paths
from eval_pipeline.orchestration.schedules import launch_evaluation_backfill, project_schedules


def build_resources(
    inputs: InputsResource | None = None,
    storage: StorageResource | None = None,
    providers: ProvidersResource | None = None,
    scope: RunScopeResource | None = None,
    paths: LocationPaths | None = None,
) -> dict[str, Any]:
    """The project's resources: those given, the others at `paths` (default: the code location's)."""
    paths = paths or location_paths()
    storage = storage or StorageResource(
        storage_dir=str(paths.storage_dir),
        results_dir=paths.results_root,
        calibration_dir=str(paths.calibration_dir),
        outputs_uri=paths.outputs_uri,
    )
    return {
        "inputs": inputs or InputsResource(kb_path=str(paths.kb), banks_dir=str(paths.banks_dir)),
        "storage": storage,
        "providers": providers
        or ProvidersResource.from_environment(
            models_file=str(paths.models_file), cache_dir=str(paths.cache_dir)
        ),
        "scope": scope or RunScopeResource(),
        "calibration_settings": CalibrationSettings(),
        "parquet_io": ParquetIOManagerFactory(base_dir=f"{storage.outputs_root}/tables"),
        "json_io": JsonIOManagerFactory(base_dir=f"{storage.outputs_root}/documents"),
    }


def _warn_of_dagster_defaults() -> None:
    """Say so when the Dagster home has no dagster.yaml (a bare `dg dev` on a new home): its
    webserver and daemon read that file once, when they start, before this location loads, and
    neither dg nor Dagster has a setting that writes it first (`make ui` does)."""
    home = os.environ.get("DAGSTER_HOME")
    if home and not (Path(home) / "dagster.yaml").exists():
        dg.get_dagster_logger().warning(
            f"{home} has no dagster.yaml: Dagster runs there on its own defaults, without the "
            "project's settings (provider pools, run monitoring, storage, INFO logging); stop it "
            "and start the UI with `make ui`, which writes them first"
        )


def location() -> dg.Definitions:
    """Every definition under `defs/`, found by dg's loader (assets, checks, jobs, sensors;
    calibration spends money, so it is its own job and a STOPPED sensor, never part of
    evaluation), with the project's resources and schedules."""
    _warn_of_dagster_defaults()
    return dg.Definitions.merge(
        dg.load_from_defs_folder(path_within_project=Path(__file__).parent),
        dg.Definitions(resources=build_resources(), executor=project_executor()),
        dg.Definitions(jobs=[launch_evaluation_backfill], schedules=project_schedules()),
    )


defs = dg.definitions(location)

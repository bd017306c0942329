"""The Dagster code location: `dagster dev` (via workspace.yaml) and the CLI both load this."""

from __future__ import annotations

from typing import Any

import dagster as dg

from eval_pipeline.defs.automation import JOBS, SENSORS
from eval_pipeline.defs.calibration import (
    CALIBRATION_ASSETS,
    CALIBRATION_JOBS,
    CALIBRATION_SENSORS,
    CalibrationSettings,
)
from eval_pipeline.defs.graph import ALL_ASSETS
from eval_pipeline.defs.io_managers import JsonIOManagerFactory, ParquetIOManagerFactory
from eval_pipeline.defs.location import location_paths
from eval_pipeline.defs.resources import (
    InputsResource,
    ProvidersResource,
    RunScopeResource,
    StorageResource,
)


def build_resources(
    inputs: InputsResource | None = None,
    storage: StorageResource | None = None,
    providers: ProvidersResource | None = None,
    scope: RunScopeResource | None = None,
) -> dict[str, Any]:
    paths = location_paths()
    storage = storage or StorageResource(
        storage_dir=str(paths.storage_dir),
        results_dir=str(paths.results_dir),
        calibration_dir=str(paths.calibration_dir),
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
        "parquet_io": ParquetIOManagerFactory(base_dir=f"{storage.storage_dir}/tables"),
        "json_io": JsonIOManagerFactory(base_dir=f"{storage.storage_dir}/documents"),
    }


defs = dg.Definitions(
    # Calibration spends money: it is its own job and sensor (STOPPED), never part of evaluation.
    assets=[*ALL_ASSETS, *CALIBRATION_ASSETS],
    jobs=[*JOBS, *CALIBRATION_JOBS],
    sensors=[*SENSORS, *CALIBRATION_SENSORS],
    resources=build_resources(),
    # One process for the whole run: a process per step costs seconds each.
    executor=dg.in_process_executor,
)

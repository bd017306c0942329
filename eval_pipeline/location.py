"""Where the code location finds the project. `dg dev`, the daemon and the runs it launches
all load the same definitions, so the paths come from the environment (one setting for all of
them), defaulting to the project layout relative to the working directory."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ENV_PREFIX = "EVAL_PIPELINE_"


@dataclass(frozen=True)
class LocationPaths:
    kb: Path
    banks_dir: Path
    models_file: Path
    results_dir: Path
    storage_dir: Path
    cache_dir: Path
    calibration_dir: Path


DEFAULTS = LocationPaths(
    kb=Path("kb"),
    banks_dir=Path("test_banks"),
    models_file=Path("models.yaml"),
    results_dir=Path("results"),
    storage_dir=Path("storage"),
    cache_dir=Path(".cache"),
    calibration_dir=Path("calibration"),
)


def location_paths() -> LocationPaths:
    """Each path from `EVAL_PIPELINE_<NAME>` (e.g. EVAL_PIPELINE_KB, EVAL_PIPELINE_RESULTS_DIR)."""
    values = {
        name: Path(os.environ.get(ENV_PREFIX + name.upper(), str(default)))
        for name, default in vars(DEFAULTS).items()
    }
    return LocationPaths(**values)

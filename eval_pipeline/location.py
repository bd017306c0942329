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
    # Object store URIs (s3://bucket/prefix, ...) that replace results_dir (reports) and
    # storage_dir/{tables,documents} (the IO managers) when set.
    results_uri: str | None = None
    outputs_uri: str | None = None

    @property
    def results_root(self) -> str:
        """Where reports go: the object store's URI when set, else the local folder."""
        return self.results_uri or str(self.results_dir)


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
    """Each path from `EVAL_PIPELINE_<NAME>` (e.g. EVAL_PIPELINE_KB, EVAL_PIPELINE_RESULTS_DIR,
    EVAL_PIPELINE_RESULTS_URI)."""
    values: dict[str, Path | str | None] = {
        name: Path(os.environ.get(ENV_PREFIX + name.upper(), str(default)))
        if isinstance(default, Path)
        else os.environ.get(ENV_PREFIX + name.upper(), default)
        for name, default in vars(DEFAULTS).items()
    }
    return LocationPaths(**values)  # type: ignore[arg-type]


def instance_home() -> Path:
    """The Dagster instance's folder: $DAGSTER_HOME, defaulting to the project's `.dagster_home`."""
    return Path(os.environ.get("DAGSTER_HOME") or ".dagster_home").resolve()

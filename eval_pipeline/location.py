"""Where the code location finds the project. `dg dev`, the daemon and the runs it launches
all load the same definitions, so the paths come from the environment (one setting for all of
them), defaulting to the project layout relative to the working directory."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from eval_pipeline.core.dates import today_utc
from eval_pipeline.core.errors import BadInput

ENV_PREFIX = "EVAL_PIPELINE_"
START_DATE_ENV = ENV_PREFIX + "START_DATE"


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


def start_date() -> str:
    """The first date the daily partitions hold: `EVAL_PIPELINE_START_DATE` (YYYY-MM-DD, not
    after today) when set, else the first date the project evaluated (its results location's
    folders), else today (UTC). Days before it are no partitions, so the UI counts none of them
    as missing; a past date asked for lowers it (`lower_start`)."""
    text = os.environ.get(START_DATE_ENV)
    if not text:
        # Here, not at the top: parsing the command line imports this module. A local results
        # folder stays a Path, so every `run` (which reads this first) imports no upath for it.
        from eval_pipeline.providers.evaluated_dates import first_evaluated_date
        from eval_pipeline.providers.object_store import output_location

        first = first_evaluated_date(output_location(location_paths().results_root))
        return min(first or today_utc(), today_utc())
    try:
        first = date.fromisoformat(text).isoformat()
    except ValueError:
        raise BadInput(f"{START_DATE_ENV}: '{text}' is not YYYY-MM-DD") from None
    if first > today_utc():
        raise BadInput(f"{START_DATE_ENV}: {first} is after today ({today_utc()}, UTC)")
    return first


def lower_start(day: str) -> None:
    """Make `day` the first date for this process and every process it starts (the runs, a
    daemon), when it is before `start_date()`: set before the code location is imported, so a
    past date asked for is a partition. Once evaluated, its results folder keeps it the first
    date for every later load (the UI, the daemon)."""
    if day < start_date():
        os.environ[START_DATE_ENV] = day


def instance_home() -> Path:
    """The Dagster instance's folder: $DAGSTER_HOME, defaulting to the project's `.dagster_home`."""
    return Path(os.environ.get("DAGSTER_HOME") or ".dagster_home").resolve()

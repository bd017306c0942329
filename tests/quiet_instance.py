"""A project's Dagster home as `run` writes it, except that runs capture no step output.

Dagster's local compute log manager, the default, starts `tail` processes for every step of an
in-process run (six per evaluation, about a tenth of its CPU), and no test of `run` reads what
they capture. Everything else (storage, pools, run monitoring) stays the project's own."""

from __future__ import annotations

from pathlib import Path

from eval_pipeline.orchestration.execution import dagster_yaml

NO_STEP_OUTPUT = (
    "compute_logs:\n"
    "  module: dagster._core.storage.noop_compute_log_manager\n"
    "  class: NoOpComputeLogManager\n"
)


def quiet_home(home: Path) -> Path:
    """`home` (a DAGSTER_HOME) holding the project's instance settings without step capture: a
    team's own dagster.yaml, which `run` leaves as it is."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text(dagster_yaml(home.resolve()) + NO_STEP_OUTPUT)
    return home

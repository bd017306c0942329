"""The project's Dagster instance: created with its settings when absent, a team's own left alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipeline.defs.execution import project_instance


def test_a_new_instance_records_info_and_up_and_an_existing_one_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))  # project_instance points it at the home it opens
    with project_instance(tmp_path / "new") as instance:
        # Debug lines are a third of a run's events, each its own SQLite commit.
        assert instance.python_log_level == "INFO"
    own = tmp_path / "own"
    own.mkdir()
    (own / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with project_instance(own) as instance:
        assert instance.python_log_level is None
    assert (own / "dagster.yaml").read_text() == "telemetry:\n  enabled: false\n"

"""The project's Dagster instance: created with its settings when absent, a team's own left alone;
and what run config may not change."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import dagster as dg
import pytest
import yaml

from eval_pipeline.definitions import location
from eval_pipeline.defs.automation import date_job
from eval_pipeline.orchestration.execution import project_instance


def test_a_new_instance_records_info_and_up_and_an_existing_one_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    with project_instance(tmp_path / "new") as instance:
        # Debug lines are a third of a run's events, each its own SQLite commit.
        assert instance.python_log_level == "INFO"
        # No "what's new" popup over the UI on its first start: the webserver asks the instance.
        assert instance.nux_enabled is False
    assert yaml.safe_load((tmp_path / "new" / "dagster.yaml").read_text())["nux"] == {"enabled": False}
    own = tmp_path / "own"
    own.mkdir()
    (own / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with project_instance(own) as instance:
        assert instance.python_log_level is None
    assert (own / "dagster.yaml").read_text() == "telemetry:\n  enabled: false\n"


@dg.asset
def one() -> int:
    return 1


def test_the_instance_opens_without_dagster_home_and_follows_its_home_when_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    first = tmp_path / "first"
    with project_instance(first) as instance:
        assert dg.materialize([one], instance=instance).success
    assert "DAGSTER_HOME" not in os.environ  # the home travels as data, not through the environment
    moved = tmp_path / "moved"
    shutil.move(first, moved)
    with project_instance(moved) as instance:
        assert len(instance.get_runs()) == 1  # the runs made before the move, read from the new place
        assert dg.materialize([one], instance=instance).success
    assert not first.exists()  # nothing written back to where the home used to be
    assert str(moved) in (moved / "dagster.yaml").read_text()


@pytest.mark.parametrize("narrowing", [{"banks": ["semantic"]}, {"test_ids": ["T-1"]}, {"topic": "any"}])
def test_a_days_partition_cannot_be_narrowed_from_run_config(narrowing: dict[str, object]) -> None:
    # A partition is the day's whole evaluation, the one diffs and gates read: the launchpad must
    # not be able to evaluate a subset of tests into it (narrowed checks are the CLI's ad-hoc path).
    job = location().resolve_job_def(date_job.name)
    run_config = {"resources": {"scope": {"config": narrowing}}}
    with pytest.raises(dg.DagsterInvalidConfigError, match=next(iter(narrowing))):
        job.execute_in_process(run_config=run_config, partition_key="2026-11-20", raise_on_error=True)

"""The scheduled evaluations, ticked with Dagster's schedule testing API: each tick asks for the
one backfill it documents (its dates and models), a paid model over the budget per tick skips the
tick naming the estimate and the budget, and the job a tick launches submits that backfill.
`dg list defs` lists the schedules from the project's settings."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest
import yaml

from eval_pipeline.core.errors import BadInput
from eval_pipeline.core.inputs.schedules import ScheduleSettings, load_schedules
from eval_pipeline.defs.graph import ALL_ASSETS
from eval_pipeline.defs.resources import InputsResource, ProvidersResource
from eval_pipeline.orchestration.backfill import BACKFILL_TAG
from eval_pipeline.orchestration.schedules import (
    LAUNCH_OP,
    SCHEDULE_TAG,
    build_schedules,
    launch_evaluation_backfill,
)
from tests.defs.conftest import REPO, Env

TICK = datetime(2026, 11, 20, 6, 0, tzinfo=UTC)
FREE = ["local-minilm", "local-hybrid"]  # the enabled free models of the project's models file
PAID = "voyage-haiku"


def _resources(env: Env) -> dict[str, object]:
    return {
        "inputs": InputsResource(kb_path=str(env.kb), banks_dir=str(env.banks)),
        "providers": ProvidersResource(models_file=str(env.models_file), cache_dir=str(env.root / "cache")),
    }


def _tick(env: Env, settings: ScheduleSettings, name: str) -> dg.RunRequest | str:
    """The schedule's run request at TICK, or its skip reason."""
    schedule = {s.name: s for s in build_schedules(settings)}[name]
    with dg.build_schedule_context(
        instance=env.instance, scheduled_execution_time=TICK, resources=_resources(env)
    ) as context:
        data = schedule.evaluate_tick(context)
    if data.skip_message is not None:
        return data.skip_message
    assert data.run_requests is not None and len(data.run_requests) == 1
    return data.run_requests[0]


def _requested(request: dg.RunRequest | str) -> dict[str, object]:
    assert isinstance(request, dg.RunRequest), request
    return dict(request.run_config["ops"][LAUNCH_OP]["config"])


def _with_paid_model(env: Env) -> None:
    doc = yaml.safe_load(env.models_file.read_text())
    doc["models"][PAID]["enabled"] = True
    env.models_file.write_text(yaml.safe_dump(doc, sort_keys=False))


def test_the_daily_tick_evaluates_the_free_models_for_its_day(env: Env) -> None:
    request = _tick(env, ScheduleSettings(), "daily_evaluation")
    assert _requested(request) == {"dates": ["2026-11-20"], "models": FREE, "schedule": "daily_evaluation"}
    assert isinstance(request, dg.RunRequest) and request.tags[SCHEDULE_TAG] == "daily_evaluation"


def test_the_comparison_backfill_covers_the_days_before_the_tick(env: Env) -> None:
    settings = ScheduleSettings.model_validate(
        {"comparison_backfill": {"window_days": 3, "models": FREE[:1]}}
    )
    requested = _requested(_tick(env, settings, "comparison_backfill"))
    assert requested == {
        "dates": ["2026-11-17", "2026-11-18", "2026-11-19"],
        "models": FREE[:1],
        "schedule": "comparison_backfill",
    }


def test_a_paid_model_is_off_until_listed_then_held_to_the_budget(env: Env) -> None:
    _with_paid_model(env)
    # Enabled in the models file, but not listed: the schedules leave it out.
    assert _requested(_tick(env, ScheduleSettings(), "daily_evaluation"))["models"] == FREE
    listed = {"daily": {"models": [FREE[0], PAID]}, "comparison_backfill": {"models": [PAID]}}
    skipped = _tick(
        env, ScheduleSettings.model_validate({**listed, "budget_per_tick_usd": 0.0001}), "daily_evaluation"
    )
    assert isinstance(skipped, str)
    assert skipped.startswith("estimated spend $") and f"({PAID} over 1 date(s))" in skipped
    assert skipped.endswith("exceeds the budget per tick of $0.0001 (budget_per_tick_usd in schedules.yaml)")
    # The window's dates each count.
    week = _tick(
        env, ScheduleSettings.model_validate({**listed, "budget_per_tick_usd": 0.0001}), "comparison_backfill"
    )
    assert isinstance(week, str) and f"({PAID} over 7 date(s))" in week
    within = _tick(
        env, ScheduleSettings.model_validate({**listed, "budget_per_tick_usd": 100.0}), "daily_evaluation"
    )
    assert _requested(within)["models"] == [FREE[0], PAID]


def test_a_listed_model_the_models_file_does_not_enable_fails_the_tick(env: Env) -> None:
    settings = ScheduleSettings.model_validate({"daily": {"models": [PAID]}})  # disabled in the file
    with pytest.raises(dg.DagsterUserCodeExecutionError) as failed:
        _tick(env, settings, "daily_evaluation")
    assert f"{PAID} not an enabled model of the models file" in str(failed.value.user_exception)


def test_the_launched_job_submits_one_backfill_of_the_tick(env: Env) -> None:
    config = {"dates": ["2026-11-19", "2026-11-20"], "models": FREE, "schedule": "comparison_backfill"}
    defs = dg.Definitions(assets=ALL_ASSETS, jobs=[launch_evaluation_backfill], resources=env.resources())
    result = defs.resolve_job_def(launch_evaluation_backfill.name).execute_in_process(
        run_config={"ops": {LAUNCH_OP: {"config": config}}}, instance=env.instance
    )
    assert result.success
    [backfill] = env.instance.get_backfills()
    assert backfill.tags[BACKFILL_TAG] == "2026-11-19..2026-11-20"
    assert backfill.tags[SCHEDULE_TAG] == "comparison_backfill"
    subset = backfill.asset_backfill_data.target_subset  # type: ignore[union-attr]
    keys = {
        str(k.partition_key)
        for k in subset.iterate_asset_partitions()
        if k.asset_key.path == ["model_comparison"]
    }
    assert keys == {"2026-11-19", "2026-11-20"}
    # The next tick of the same window waits for it (a cron more frequent than a backfill lasts).
    settings = ScheduleSettings.model_validate({"comparison_backfill": {"window_days": 2}})
    next_tick = TICK.replace(day=21)
    schedule = {s.name: s for s in build_schedules(settings)}["comparison_backfill"]
    with dg.build_schedule_context(
        instance=env.instance, scheduled_execution_time=next_tick, resources=_resources(env)
    ) as context:
        skipped = schedule.evaluate_tick(context).skip_message
    assert (
        skipped
        == f"backfill {backfill.backfill_id} of 2026-11-19..2026-11-20 from an earlier tick is still running"
    )


def test_a_wrong_setting_is_one_line_naming_the_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "schedules.yaml"
    assert load_schedules(path) == ScheduleSettings()  # no file: the defaults
    path.write_text("daily:\n  cron: every day\n")
    with pytest.raises(BadInput, match=r"schedules.yaml: field 'daily.cron': 'every day' is not a cron"):
        load_schedules(path)
    path.write_text("comparison_backfill:\n  window_days: 0\n")
    with pytest.raises(BadInput, match=r"field 'comparison_backfill.window_days'"):
        load_schedules(path)


@pytest.mark.timeout(240)
def test_dg_lists_the_schedules_the_project_declares(tmp_path: Path) -> None:
    shutil.copy(REPO / "models.yaml", tmp_path / "models.yaml")
    (tmp_path / "schedules.yaml").write_text(
        "daily:\n  cron: '30 5 * * *'\ncomparison_backfill:\n  enabled: false\n"
    )
    env = {
        **os.environ,
        "EVAL_PIPELINE_MODELS_FILE": str(tmp_path / "models.yaml"),
        "DAGSTER_HOME": str(tmp_path / "dagster_home"),
        "VIRTUAL_ENV": str(Path(sys.executable).parents[1]),
    }
    dg_cli = str(Path(sys.executable).with_name("dg"))
    listed = subprocess.run(
        [dg_cli, "list", "defs", "--json"], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    schedules = {s["name"]: s["cron_schedule"] for s in json.loads(listed.stdout)["schedules"]}
    assert schedules == {"daily_evaluation": "30 5 * * *", "comparison_backfill": "0 7 * * 1"}

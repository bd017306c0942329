"""The on-demand calibration asset and the opt-in KB sensor, against the emulator."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from eval_pipeline.core.calibration.files import LOG_FILE, read_log
from eval_pipeline.core.calibration.review import decide, read_review, save_review
from eval_pipeline.core.dates import today_utc
from eval_pipeline.definitions import location
from eval_pipeline.defs.calibration import (
    AgreementConfig,
    CalibrationConfig,
    CalibrationSettings,
    calibration_agreement,
    calibration_job,
    kb_affected_calibration,
)
from eval_pipeline.defs.graph import MATERIALIZABLE
from eval_pipeline.defs.inputs import history_files
from eval_pipeline.testing.emulator.server import EmulatorHandle, start_emulator
from tests.defs.conftest import Env


@pytest.fixture
def emulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[EmulatorHandle]:
    handle = start_emulator()
    monkeypatch.setenv("ANTHROPIC_BASE_URL", handle.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dagster-not-real")
    yield handle
    handle.stop()


def _materialize(env: Env, partition: str, **config: Any) -> dg.ExecuteInProcessResult:
    run_config = dg.RunConfig(
        ops={
            "opus_calibration": CalibrationConfig(
                calibration_dir=str(env.root / "calibration"), rate_per_min=60_000, **config
            )
        }
    )
    return calibration_job.execute_in_process(
        partition_key=partition,
        resources=env.resources(),
        instance=env.instance,
        run_config=run_config,
        raise_on_error=False,
    )


def _metadata(result: dg.ExecuteInProcessResult) -> dict[str, Any]:
    (event,) = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    materialization = event.step_output_data
    assert materialization is not None
    return {k: getattr(v, "value", v) for k, v in materialization.metadata.items()}


def test_apply_changes_the_history_version_automation_watches(env: Env, emulator: EmulatorHandle) -> None:
    resources = env.resources()
    inputs = resources["inputs"]
    before = inputs.history_hash()
    dry = _materialize(env, today_utc(), scope="full")
    dry_meta = _metadata(dry)
    assert dry.success and dry_meta["applied"] is False
    assert inputs.history_hash() == before  # a dry run writes no history, only its review file
    review = read_review(Path(dry_meta["review_file"]))
    proposals = dry_meta["proposals"]
    assert [p["test_id"] for p in proposals] == [i.test_id for i in review.items]
    assert all(p["raw_response"]["content"] and p["reasoning"] for p in proposals)

    applied = _materialize(env, today_utc(), scope="single", test_ids=["T-MOULD-001"], apply=True)
    meta = _metadata(applied)
    assert applied.success and meta["applied"] is True and meta["changed"] == 1
    assert meta["calibration_cost_usd"] > 0 and meta["history_file"]
    assert inputs.history_hash() != before
    assert len(read_log(env.root / "calibration" / LOG_FILE).records) == 1

    # The job recorded the history source's new version itself: automation re-scores from it.
    record = env.instance.get_latest_data_version_record(history_files.key)
    assert record is not None and record.asset_observation is not None
    assert record.run_id == applied.run_id
    assert record.asset_observation.data_version == inputs.history_hash() != before


def test_agreement_asset_shows_kappa_for_reviewed_proposals(env: Env, emulator: EmulatorHandle) -> None:
    dry = _materialize(env, today_utc(), scope="full")
    path = Path(_metadata(dry)["review_file"])
    review = read_review(path)
    for item in review.to_review:
        review = decide(review, item.test_id, "accepted", by="Dr Lee")
    save_review(path, review)
    result = dg.materialize(
        [calibration_agreement],
        resources=env.resources(),
        instance=env.instance,
        run_config=dg.RunConfig(
            ops={"calibration_agreement": AgreementConfig(calibration_dir=str(env.root / "calibration"))}
        ),
    )
    meta = _metadata(result)
    assert meta["judgements"] == len(review.to_review) > 0
    assert meta["kappa"] == 1.0 and meta["percent_agreement"] == 100.0 and meta["disagreements"] == 0
    assert "# Calibrator vs clinicians: agreement" in meta["report"]


def test_calibration_is_a_job_never_an_asset_to_materialise() -> None:
    repo = location().get_repository_def()
    assert "opus_calibration" not in {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()}
    assert repo.get_job("opus_calibration_job").partitions_def is not None
    assert all(k.to_user_string() != "opus_calibration" for a in MATERIALIZABLE for k in a.keys)


def test_apply_refuses_a_past_partition(env: Env, emulator: EmulatorHandle) -> None:
    result = _materialize(env, "2026-11-01", scope="full", apply=True)
    assert not result.success
    assert "POST /v1/messages" not in emulator.stats["requests"]


def _sensor_context(env: Env, cursor: str | None, **settings: Any) -> dg.SensorEvaluationContext:
    resources = {**env.resources(), "calibration_settings": CalibrationSettings(**settings)}
    return dg.build_sensor_context(instance=env.instance, resources=resources, cursor=cursor)


def test_kb_sensor_requests_an_affected_calibration_only_when_enabled(env: Env) -> None:
    off = kb_affected_calibration(_sensor_context(env, None))
    assert isinstance(off, dg.SkipReason) and "off" in (off.skip_message or "")
    first = kb_affected_calibration(_sensor_context(env, None, on_kb_change=True))
    assert isinstance(first, dg.SensorResult) and not first.run_requests and first.cursor

    data = yaml.safe_load(env.kb.read_text())
    entity = next(e for e in data["entities"] if e["entity_id"] == "deposit_return")
    entity["content"] += "\nPhotograph the meter readings on the day you leave."
    env.kb.write_text(yaml.safe_dump(data, sort_keys=False))

    changed = kb_affected_calibration(_sensor_context(env, first.cursor, on_kb_change=True, max_cost_usd=1.0))
    assert isinstance(changed, dg.SensorResult)
    (request,) = changed.run_requests or []
    assert request.partition_key == today_utc()
    config = request.run_config["ops"]["opus_calibration"]["config"]
    assert config["scope"] == "affected" and config["added_entities"] == ["deposit_return"]
    assert (config["apply"], config["trigger"], config["max_cost_usd"]) == (False, "kb_change", 1.0)
    again = kb_affected_calibration(_sensor_context(env, changed.cursor, on_kb_change=True))
    assert isinstance(again, dg.SensorResult) and not again.run_requests

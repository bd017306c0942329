from __future__ import annotations

import json
from datetime import UTC, datetime

import dagster as dg
import pytest

from eval_pipeline.core.expectations.history import HistoryChange, HistoryFile, append_history
from eval_pipeline.core.inputs.banks import Expectations
from eval_pipeline.core.report.run_document import read_document
from eval_pipeline.core.scoring.gate import GateDecision
from eval_pipeline.definitions import defs
from eval_pipeline.defs.automation import (
    HISTORY_DOWNSTREAM,
    JOBS,
    KB_DOWNSTREAM,
    SCHEDULES,
    SCOPE_TAG,
    SENSORS,
    TIER_TAG,
    chain_model_runs,
    date_job,
    diff_requests,
    model_job,
    model_stage_requests,
    tier_models,
)
from eval_pipeline.defs.execution import QUIET_LOGS, materialize_stage, run_all
from eval_pipeline.defs.graph import ALL_ASSETS, DATE_STAGE, DIFFS, PER_MODEL, everything
from eval_pipeline.defs.partitions import model_date_key, sync_model_partitions, today_utc
from eval_pipeline.defs.resources import ProvidersResource
from tests.defs.conftest import Env

DATE = "2026-11-20"
MODELS = ["local-minilm"]


def _materialisations(env: Env, key: str) -> int:
    records = env.instance.fetch_materializations(dg.AssetKey(key), limit=1000).records
    return len(records)


def _sensor(name: str) -> dg.SensorDefinition:
    return next(s for s in SENSORS if s.name == name)


def _keys(*names: str) -> set[dg.AssetKey]:
    return {dg.AssetKey(n) for n in names}


def test_definitions_load_with_every_asset_check_sensor_and_schedule() -> None:
    repo = defs.get_repository_def()
    keys = {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()}
    assert {"knowledge_base", "semantic_retrievals", "scored_aggregate", "run_report", "release_gate"} <= keys
    checks = {c.name for c in repo.asset_graph.asset_check_keys}
    assert checks == {
        "banks_reference_known_entities",
        "no_new_hard_fails",
        "always_entities_present",
        "no_critical_failures",
    }
    assert {s.name for s in SENSORS} == {
        "kb_version_sensor_local",
        "kb_version_sensor_api",
        "history_sensor_local",
        "history_sensor_api",
        "chain_model_runs",
        "diffs_after_reports",
    }
    assert {s.name for s in SCHEDULES} == {"model_comparison_local", "model_comparison_api"}
    assert _sensor("kb_version_sensor_api").default_status is dg.DefaultSensorStatus.STOPPED
    # Calibration costs money: its own job and a STOPPED sensor, outside the evaluation graph.
    calibration = repo.get_sensor_def("kb_affected_calibration")
    assert calibration.default_status is dg.DefaultSensorStatus.STOPPED
    assert "opus_calibration" in keys and dg.AssetKey("opus_calibration") not in everything()


def test_full_materialisation_of_one_partition(env: Env) -> None:
    outcomes = run_all(DATE, MODELS, env.resources(), env.instance)
    assert [o.name for o in outcomes] == ["shared", "local-minilm", "local-minilm diff", "comparison"]
    assert all(o.failures == [] for o in outcomes)
    doc = read_document(env.results / "local-minilm" / DATE / "results.json")
    assert (len(doc.semantic), len(doc.state), len(doc.pattern), len(doc.always)) == (8, 3, 4, 2)
    assert doc.provenance.kb_version == "tenant-fixture-1" and doc.provenance.date == DATE
    assert set(doc.provenance.bank_hashes) >= {"semantic/tenant_questions.json", "pattern/pattern_rules.json"}
    report = (env.results / "local-minilm" / DATE / "report.md").read_text()
    assert "## Summary" in report and "## Provenance and cost" in report
    for key in everything():
        assert _materialisations(env, key.to_user_string()) == 1, key


def _definitions(env: Env) -> dg.Definitions:
    return dg.Definitions(assets=ALL_ASSETS, jobs=JOBS, resources=env.resources())


def _run_triggered(env: Env, request: dg.RunRequest, date: str = DATE) -> list[dg.RunRequest]:
    """Run a date-stage request through the real job, then the model runs the chain sensor asks for."""
    job = _definitions(env).resolve_job_def(date_job.name)
    result = job.execute_in_process(
        instance=env.instance,
        partition_key=date,
        asset_selection=request.asset_selection,
        tags=request.tags,
        run_config=QUIET_LOGS,
    )
    assert result.success
    ctx = dg.build_run_status_sensor_context(
        sensor_name=chain_model_runs.name,
        dagster_instance=env.instance,
        dagster_run=result.dagster_run,
        dagster_event=result.get_run_success_event(),
        resources={"providers": env.resources()["providers"]},
    )
    chained = chain_model_runs(ctx)
    assert isinstance(chained, dg.SensorResult)
    model_job_def = _definitions(env).resolve_job_def(model_job.name)
    for follow in chained.run_requests or []:
        sync_model_partitions(env.instance, [follow.tags["model"]])
        model_job_def.execute_in_process(
            instance=env.instance,
            partition_key=follow.partition_key,
            asset_selection=follow.asset_selection,
            run_config=QUIET_LOGS,
            raise_on_error=False,
        )
    return list(chained.run_requests or [])


def test_history_change_rescores_without_retrieving(env: Env) -> None:
    today = today_utc()  # sensors evaluate today
    run_all(today, ["local-minilm", "local-hybrid"], env.resources(), env.instance)
    resources = env.resources()
    sensor = _sensor("history_sensor_local")
    first = sensor(dg.build_sensor_context(instance=env.instance, resources=resources))
    assert isinstance(first, dg.SensorResult)
    append_history(
        env.banks / "semantic" / "history",
        HistoryFile(
            version=datetime.now(UTC).replace(microsecond=0),
            calibration_trigger="manual",
            model="test",
            changes=[
                HistoryChange(test_id="T-RENT-001", updated=Expectations(expected_primary=["lease_renewal"]))
            ],
            changed_count=1,
        ),
    )
    result = sensor(dg.build_sensor_context(instance=env.instance, resources=resources, cursor=first.cursor))
    assert isinstance(result, dg.SensorResult)
    (request,) = result.run_requests or []
    assert set(request.asset_selection or []) == {
        dg.AssetKey("expectation_history"),
        dg.AssetKey("resolved_expectations"),
    }
    chained = _run_triggered(env, request, today)
    requested = set(request.asset_selection or []) | {k for r in chained for k in r.asset_selection or []}
    assert requested == HISTORY_DOWNSTREAM - DIFFS  # the diffs follow via diffs_after_reports
    assert {r.tags["model"] for r in chained} == {"local-minilm", "local-hybrid"}
    assert _materialisations(env, "semantic_retrievals") == 2  # one per model, from the first run only
    assert _materialisations(env, "state_activations") == 1
    assert _materialisations(env, "semantic_results") == 4  # first run, then both models re-scored
    doc = read_document(env.results / "local-minilm" / today / "results.json")
    rent = next(r for r in doc.semantic if r.test_id == "T-RENT-001")
    assert rent.expectation_source == f"opus_{today}"
    assert rent.expectations.expected_primary == ["lease_renewal"]
    assert rent.hard_fail == ("lease_renewal" not in [s.entity_id for s in rent.selections])


def test_narrow_trigger_fills_in_what_was_never_materialised(env: Env) -> None:
    resources = env.resources()
    first = _sensor("kb_version_sensor_local")(
        dg.build_sensor_context(instance=env.instance, resources=resources)
    )
    assert isinstance(first, dg.SensorResult)
    (initial,) = first.run_requests or []
    assert initial.tags[SCOPE_TAG] == "all"  # the KB sensor's first tick evaluates everything once
    sensor = _sensor("history_sensor_local")
    quiet = sensor(dg.build_sensor_context(instance=env.instance, resources=resources))
    assert isinstance(quiet, dg.SensorResult) and not quiet.run_requests and quiet.cursor
    later = sensor(dg.build_sensor_context(instance=env.instance, resources=resources, cursor="older"))
    assert isinstance(later, dg.SensorResult)
    (request,) = later.run_requests or []
    assert request.tags[SCOPE_TAG] == "history"
    assert set(request.asset_selection or []) == DATE_STAGE  # nothing exists yet
    (follow,) = model_stage_requests(request.tags, today_utc(), ["local-minilm"], env.instance)
    assert set(follow.asset_selection or []) == set(PER_MODEL)


def test_kb_sensor_requests_exactly_the_kb_downstream(env: Env) -> None:
    resources = env.resources()
    sensor = _sensor("kb_version_sensor_local")
    run_all(today_utc(), ["local-minilm", "local-hybrid"], resources, env.instance)
    # The KB changed since the sensor last looked (the first tick would evaluate everything).
    result = sensor(dg.build_sensor_context(instance=env.instance, resources=resources, cursor="older"))
    assert isinstance(result, dg.SensorResult)
    (request,) = result.run_requests or []
    assert request.partition_key == today_utc() and request.tags[TIER_TAG] == "local"
    follow = model_stage_requests(request.tags, today_utc(), ["local-minilm", "local-hybrid"], env.instance)
    requested = set(request.asset_selection or []) | {k for r in follow for k in r.asset_selection or []}
    assert requested == KB_DOWNSTREAM - DIFFS  # the diffs follow via diffs_after_reports
    assert _keys("knowledge_base", "test_banks", "semantic_retrievals", "release_gate") <= KB_DOWNSTREAM
    assert dg.AssetKey("expectation_history") not in KB_DOWNSTREAM
    again = sensor(dg.build_sensor_context(instance=env.instance, resources=resources, cursor=result.cursor))
    assert isinstance(again, dg.SkipReason)


def test_schedules_request_every_enabled_model_of_their_tier(env: Env) -> None:
    text = env.models_file.read_text().replace("enabled: false", "enabled: true", 1)
    env.models_file.write_text(text)  # enable the first API model
    when = datetime(2026, 11, 21, 6, tzinfo=UTC)
    providers = env.resources()["providers"]
    for tier, expected in (("local", {"local-minilm", "local-hybrid"}), ("api", {"voyage-haiku"})):
        schedule = next(s for s in SCHEDULES if s.name == f"model_comparison_{tier}")
        ctx = dg.build_schedule_context(
            instance=env.instance, scheduled_execution_time=when, repository_def=defs.get_repository_def()
        )
        (request,) = schedule.evaluate_tick(ctx).run_requests or []
        assert request.partition_key == "2026-11-21" and request.tags[TIER_TAG] == tier
        assert set(request.asset_selection or []) == DATE_STAGE
        models = tier_models(providers, cost_incurring=tier == "api")
        assert set(models) == expected
    api = next(s for s in SCHEDULES if s.name == "model_comparison_api")
    assert api.default_status is dg.DefaultScheduleStatus.STOPPED


def test_schedule_tick_runs_every_local_model_end_to_end(env: Env) -> None:
    schedule = next(s for s in SCHEDULES if s.name == "model_comparison_local")
    ctx = dg.build_schedule_context(
        instance=env.instance,
        scheduled_execution_time=datetime(2026, 11, 21, 6, tzinfo=UTC),
        repository_def=defs.get_repository_def(),
    )
    (request,) = schedule.evaluate_tick(ctx).run_requests or []
    chained = _run_triggered(env, request, "2026-11-21")
    assert {r.tags["model"] for r in chained} == {"local-minilm", "local-hybrid"}
    for model in ("local-minilm", "local-hybrid"):
        assert (env.results / model / "2026-11-21" / "report.md").is_file()


def _gate(env: Env, model: str = "local-minilm") -> GateDecision:
    return GateDecision.model_validate_json((env.results / model / DATE / "gate.json").read_text())


def test_a_partition_that_turns_critical_flips_its_gate_to_failed(env: Env) -> None:
    first = run_all(DATE, MODELS, env.resources(), env.instance)
    assert all(o.success and o.failures == [] and o.failed_checks == [] for o in first)
    assert _gate(env).passed

    rules = env.banks / "pattern" / "pattern_rules.json"
    data = json.loads(rules.read_text())
    data["crisis_patterns"][0]["pattern"] = "will never match this"
    rules.write_text(json.dumps(data))
    outcomes = run_all(DATE, MODELS, env.resources(), env.instance)
    model = outcomes[1]
    # A CRITICAL verdict is a finished evaluation: a green run with a red check, not a failed run.
    assert (
        model.success
        and model.failures == []
        and model.failed_checks == ["release_gate:no_critical_failures"]
    )
    # The re-run wrote a fresh report and a fresh, failed gate: no stale "passed" survives.
    runs = 2 * len(MODELS)
    assert _materialisations(env, "run_report") == runs and _materialisations(env, "release_gate") == runs
    gate = _gate(env)
    assert not gate.passed and gate.status == "failed" and gate.reasons == ["1 critical failure(s)"]
    partition = str(model_date_key("local-minilm", DATE))
    records = env.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("release_gate"), asset_partitions=[partition]), limit=1
    ).records
    latest = records[0].asset_materialization
    assert latest is not None and latest.metadata["passed"].value is False
    doc = read_document(env.results / "local-minilm" / DATE / "results.json")
    assert doc.aggregate.health.value == "CRITICAL"
    assert [c.test_id for c in doc.aggregate.critical_failures] == ["T-PAT-CRISIS-001"]


def test_api_keys_reach_providers_through_envvar_and_never_metadata(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-secret-value")
    monkeypatch.delenv("VOYAGE_API_KEY", raising=False)
    providers = ProvidersResource.from_environment(
        models_file=str(env.models_file), cache_dir=str(env.root / "cache")
    )
    # Bound by name (what the UI shows); an unset variable is not bound at all.
    assert isinstance(providers.anthropic_api_key, dg.EnvVar) and providers.voyage_api_key is None

    @dg.asset
    def seen(providers: ProvidersResource) -> dict[str, str]:
        return providers.environ()

    result = dg.materialize([seen], resources={"providers": providers}, instance=env.instance)
    assert result.output_for_node("seen") == {"ANTHROPIC_API_KEY": "sk-test-secret-value"}
    run_all(DATE, MODELS, {**env.resources(), "providers": providers}, env.instance)
    stored = "".join(
        str(r.asset_materialization.metadata)
        for key in everything()
        for r in env.instance.fetch_materializations(key, limit=100).records
        if r.asset_materialization is not None
    )
    stored += (env.results / "local-minilm" / DATE / "results.json").read_text()
    assert "sk-test-secret-value" not in stored


def test_diff_sensor_requests_diffs_for_newer_reports_only(env: Env) -> None:
    today = today_utc()
    run_all(today, MODELS, env.resources(), env.instance)
    assert diff_requests(env.instance, today) == []  # the CLI run already produced both diffs
    run_all(today, MODELS, env.resources(), env.instance)
    before = _materialisations(env, "regression_diff")
    # A report written after the last diff (as automation's model runs do) asks for fresh diffs.
    materialize_stage(
        "model", set(PER_MODEL), model_date_key("local-minilm", today), env.resources(), env.instance
    )
    requests = diff_requests(env.instance, today)
    assert sorted(str(r.job_name) for r in requests) == ["compare_models", "diff_model"]
    assert _materialisations(env, "regression_diff") == before


def test_calibration_cost_is_reported_apart_from_the_systems(env: Env) -> None:
    record = {
        "calibration_id": "c1",
        "started_at": f"{DATE}T09:00:00Z",
        "duration_s": 3.0,
        "scope": "full",
        "trigger": "full",
        "test_ids": ["T-RENT-001"],
        "model": "claude-opus-5-5",
        "prompt_version": "v1",
        "kb_version": "tenant-fixture-1",
        "kb_hash": "x",
        "mode": "sequential",
        "changed": 1,
        "unchanged": 0,
        "usage": {"input_tokens": 1000, "output_tokens": 100},
        "cost_usd": 0.25,
        "kb_prefix_tokens": 900,
    }
    log = env.root / "calibration" / "calibration_log.json"
    log.parent.mkdir()
    log.write_text(json.dumps({"schema_version": 1, "records": [record]}))
    run_all(DATE, MODELS, env.resources(), env.instance)
    doc = read_document(env.results / "local-minilm" / DATE / "results.json")
    assert doc.provenance.calibration_cost_usd == 0.25 and doc.aggregate.cost_usd == 0.0
    report = (env.results / "local-minilm" / DATE / "report.md").read_text()
    assert "| Calibration cost that day (not system under test) | $0.2500 |" in report
    assert "| Cost (system under test) | $0.0000 |" in report


def test_results_json_carries_metrics_and_stage_attribution(env: Env) -> None:
    run_all(DATE, MODELS, env.resources(), env.instance)
    doc = read_document(env.results / "local-minilm" / DATE / "results.json")
    assert {m.test_id for m in doc.retrieval_metrics} == {r.test_id for r in doc.semantic}
    assert all(0.0 <= m.ndcg_6 <= 1.0 and 0.0 <= m.candidate_recall_15 <= 1.0 for m in doc.retrieval_metrics)
    assert {a.test_id for a in doc.stage_attribution} == {r.test_id for r in doc.semantic if r.hard_fail}

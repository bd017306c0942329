from __future__ import annotations

import json
import shutil
from datetime import UTC, date, datetime, timedelta

import dagster as dg
import pytest
import yaml

from eval_pipeline.core.dates import today_utc
from eval_pipeline.core.expectations.history import HistoryChange, HistoryFile, append_history
from eval_pipeline.core.inputs.banks import Expectations
from eval_pipeline.core.report.run_document import read_document
from eval_pipeline.core.scoring.gate import GateDecision
from eval_pipeline.definitions import location
from eval_pipeline.defs.automation import SENSORS, model_partitions
from eval_pipeline.defs.execution import run_all
from eval_pipeline.defs.graph import EVALUATION, MATERIALIZABLE
from eval_pipeline.defs.partitions import model_date_key, sync_model_partitions
from eval_pipeline.defs.resources import ProvidersResource
from eval_pipeline.defs.stages import StageOutcome
from tests.defs.automation_driver import Driver
from tests.defs.conftest import REPO, Env

DATE = "2026-11-20"
MODELS = ["local-minilm"]
BOTH = ["local-minilm", "local-hybrid"]
EVALUATED = {a.key.to_user_string() for a in MATERIALIZABLE}


def _materialisations(env: Env, key: str) -> int:
    records = env.instance.fetch_materializations(dg.AssetKey(key), limit=1000).records
    return len(records)


def _driver(env: Env, day: str, models: list[str]) -> Driver:
    """Automation on `day` (just after midnight UTC), the sources already observed once."""
    sync_model_partitions(env.instance, models)
    start = datetime.fromisoformat(day).replace(tzinfo=UTC) + timedelta(minutes=1)
    driver = Driver(env.resources(), env.instance, start)
    driver.tick()  # the first evaluation only starts the cron clock
    return driver


def _history_change(env: Env, when: datetime, primary: str) -> None:
    change = HistoryChange(test_id="T-RENT-001", updated=Expectations(expected_primary=[primary]))
    append_history(
        env.banks / "semantic" / "history",
        HistoryFile(
            version=when.replace(microsecond=0),
            calibration_trigger="manual",
            model="test",
            changes=[change],
            changed_count=1,
        ),
    )


def test_definitions_load_with_every_asset_check_and_automation() -> None:
    repo = location().get_repository_def()
    keys = {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()}
    assert {"input_files", "knowledge_base", "semantic_retrievals", "run_report", "model_comparison"} <= keys
    checks = {c.name for c in repo.asset_graph.asset_check_keys}
    assert checks == {
        "banks_reference_known_entities",
        "no_new_hard_fails",
        "always_entities_present",
        "no_critical_failures",
    }
    assert {s.name for s in SENSORS} == {"evaluation_automation", "model_partitions"}
    assert all(s.default_status is dg.DefaultSensorStatus.RUNNING for s in SENSORS)
    assert not repo.schedule_defs  # Declarative Automation schedules; no hand-written schedules
    # Every evaluated asset says when it runs; calibration (paid) is outside the evaluation.
    assert all(a.automation_conditions_by_key[a.key] is not None for a in MATERIALIZABLE)
    evaluated = EVALUATION.resolve(repo.asset_graph)
    assert evaluated == {a.key for a in MATERIALIZABLE} | {
        dg.AssetKey("input_files"),
        dg.AssetKey("history_files"),
    }
    # "Materialize all" in the UI covers the assets; calibration (paid) is a job, not one of them.
    assert "opus_calibration" not in {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()}
    calibration = repo.get_sensor_def("kb_affected_calibration")
    assert calibration.default_status is dg.DefaultSensorStatus.STOPPED
    assert {j.name for j in repo.get_all_jobs()} >= {
        "evaluate_date",
        "evaluate_model",
        "compare_models",
        "opus_calibration_job",
    }


@pytest.fixture(scope="module")
def evaluated(shared_env: Env) -> tuple[Env, list[StageOutcome]]:
    """One evaluation of DATE, shared by the tests that only read it."""
    return shared_env, run_all(DATE, MODELS, shared_env.resources(), shared_env.instance)


def test_full_materialisation_of_one_partition(evaluated: tuple[Env, list[StageOutcome]]) -> None:
    env, outcomes = evaluated
    assert [o.name for o in outcomes] == ["shared", "local-minilm", "comparison"]
    assert all(o.success and o.failures == [] for o in outcomes)
    doc = read_document(env.results / "local-minilm" / DATE / "results.json")
    assert (len(doc.semantic), len(doc.state), len(doc.pattern), len(doc.always)) == (8, 3, 4, 2)
    assert doc.provenance.kb_version == "tenant-fixture-1" and doc.provenance.date == DATE
    assert set(doc.provenance.bank_hashes) >= {"semantic/tenant_questions.json", "pattern/pattern_rules.json"}
    assert doc.provenance.inputs_snapshot  # which stored snapshot of the inputs it evaluated
    report = (env.results / "local-minilm" / DATE / "report.md").read_text()
    assert "## Summary" in report and "## Provenance and cost" in report
    for name in EVALUATED:
        assert _materialisations(env, name) == 1, name
    # CLI runs are named jobs in the UI, not `__ephemeral_asset_job__`.
    jobs = {r.dagster_run.job_name for r in env.instance.get_run_records()}
    assert jobs == {"evaluate_date", "evaluate_model", "compare_models"}


def test_automation_evaluates_a_new_day_then_a_history_change_rescores_without_retrieving(
    env: Env,
) -> None:
    today = today_utc()
    driver = _driver(env, today, BOTH)
    assert driver.tick(minutes=5) == {"input_files": {None}, "history_files": {None}}  # the cron
    assert driver.settle() == EVALUATED and driver.failures == []
    for model in BOTH:
        names = {p.name for p in (env.results / model / today).iterdir()}
        assert {
            "results.json",
            "report.md",
            "gate.json",
            "regression_diff.md",
            "model_comparison.md",
        } <= names
    assert _materialisations(env, "model_comparison") == 1
    assert driver.tick(minutes=5) == {"input_files": {None}, "history_files": {None}}
    assert driver.settle() == set()  # nothing changed: observing again evaluates nothing

    _history_change(env, datetime.now(UTC), "lease_renewal")
    driver.tick(minutes=5)
    requested = driver.settle()
    assert driver.failures == []
    assert requested == {
        "expectation_history",
        "resolved_expectations",
        "semantic_results",
        "scored_aggregate",
        "run_report",
        "release_gate",
        "regression_diff",
        "model_comparison",
    }
    assert _materialisations(env, "semantic_retrievals") == 2  # one per model, from the first run only
    assert _materialisations(env, "semantic_results") == 4  # first run, then both models re-scored
    doc = read_document(env.results / "local-minilm" / today / "results.json")
    rent = next(r for r in doc.semantic if r.test_id == "T-RENT-001")
    assert rent.expectation_source == f"opus_{today}"
    assert rent.expectations.expected_primary == ["lease_renewal"]


def test_a_kb_edit_reretrieves_and_leaves_history_alone(env: Env) -> None:
    driver = _driver(env, today_utc(), MODELS)
    driver.tick(minutes=5)
    driver.settle()
    env.kb.write_text(
        env.kb.read_text().replace("kb_version: tenant-fixture-1", "kb_version: tenant-fixture-2")
    )
    driver.tick(minutes=5)
    requested = driver.settle()
    assert driver.failures == []
    assert {"input_snapshot", "knowledge_base", "semantic_retrievals", "run_report"} <= requested
    assert "expectation_history" not in requested  # the history did not change
    doc = read_document(env.results / "local-minilm" / today_utc() / "results.json")
    assert doc.provenance.kb_version == "tenant-fixture-2"


def test_a_new_model_and_a_new_day_with_only_a_history_change_evaluate_without_error(env: Env) -> None:
    today = date.fromisoformat(today_utc())
    yesterday = (today - timedelta(days=1)).isoformat()
    driver = _driver(env, yesterday, MODELS)
    driver.tick(minutes=5)
    driver.settle()
    assert driver.failures == [] and (env.results / "local-minilm" / yesterday / "report.md").is_file()

    # Overnight: a second model is enabled and a calibration changes one expectation; nothing else.
    result = model_partitions(dg.build_sensor_context(instance=env.instance, resources=env.resources()))
    assert isinstance(result, dg.SensorResult)
    (added,) = result.dynamic_partitions_requests or []
    assert isinstance(added, dg.AddDynamicPartitionsRequest) and list(added.partition_keys) == [
        "local-hybrid"
    ]
    env.instance.add_dynamic_partitions(added.partitions_def_name, list(added.partition_keys))
    _history_change(env, datetime.now(UTC), "lease_renewal")
    driver.now = datetime.fromisoformat(today.isoformat()).replace(tzinfo=UTC)
    requested = driver.settle()
    assert driver.failures == []
    assert requested == EVALUATED
    for model in BOTH:
        assert (env.results / model / today.isoformat() / "report.md").is_file()
    diff = json.loads((env.results / "local-minilm" / today.isoformat() / "regression_diff.json").read_text())
    assert diff["baseline_date"] == yesterday
    fresh = json.loads(
        (env.results / "local-hybrid" / today.isoformat() / "regression_diff.json").read_text()
    )
    assert fresh["baseline_date"] is None  # a new model has no yesterday: said, not an error


def test_automation_never_spends_money_unless_the_model_says_so(env: Env) -> None:
    doc = yaml.safe_load(env.models_file.read_text())
    doc["models"]["voyage-haiku"]["enabled"] = True  # a paid model, without `automate: true`
    env.models_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    models = [k for k, m in env.resources()["providers"].models().items() if m.enabled]
    assert models == [*BOTH, "voyage-haiku"]
    driver = _driver(env, today_utc(), models)
    driver.tick(minutes=5)
    driver.settle()
    assert driver.failures == []
    paid = next(m for m in models if m not in BOTH)
    assert not (env.results / paid).exists()  # skipped, nothing downstream waits on it
    comparison = json.loads((env.results / "_comparison" / today_utc() / "model_comparison.json").read_text())
    assert {m["model"] for m in comparison["models"]} == set(BOTH)


def _gate(env: Env, model: str = "local-minilm") -> GateDecision:
    return GateDecision.model_validate_json((env.results / model / DATE / "gate.json").read_text())


def test_a_critical_verdict_is_a_successful_run_with_a_failed_check(env: Env) -> None:
    first = run_all(DATE, MODELS, env.resources(), env.instance)
    assert all(o.success and o.failures == [] and o.failed_checks == [] for o in first)
    assert _gate(env).passed

    rules = env.banks / "pattern" / "pattern_rules.json"
    data = json.loads(rules.read_text())
    data["crisis_patterns"][0]["pattern"] = "will never match this"
    rules.write_text(json.dumps(data))
    outcomes = run_all(DATE, MODELS, env.resources(), env.instance)
    model = outcomes[1]
    assert (
        model.success
        and model.failures == []
        and model.failed_checks == ["release_gate:no_critical_failures"]
    )
    # In Dagster's own records: the model run succeeded, and its check evaluation failed.
    (run,) = env.instance.get_run_records(
        dg.RunsFilter(job_name="evaluate_model"), limit=1, order_by="create_timestamp", ascending=False
    )
    assert run.dagster_run.status is dg.DagsterRunStatus.SUCCESS
    check = env.instance.event_log_storage.get_latest_asset_check_execution_by_key(
        [dg.AssetCheckKey(dg.AssetKey("release_gate"), "no_critical_failures")]
    )
    (latest,) = check.values()
    assert latest.run_id == run.dagster_run.run_id and latest.status.value == "FAILED"
    # The re-run wrote a fresh report and a fresh, failed gate: no stale "passed" survives.
    assert _materialisations(env, "run_report") == 2 and _materialisations(env, "release_gate") == 2
    gate = _gate(env)
    assert not gate.passed and gate.status == "failed" and gate.reasons == ["1 critical failure(s)"]
    partition = str(model_date_key("local-minilm", DATE))
    records = env.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("release_gate"), asset_partitions=[partition]), limit=1
    ).records
    latest_gate = records[0].asset_materialization
    assert latest_gate is not None and latest_gate.metadata["passed"].value is False
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
        for key in MATERIALIZABLE
        for r in env.instance.fetch_materializations(key.key, limit=100).records
        if r.asset_materialization is not None
    )
    stored += (env.results / "local-minilm" / DATE / "results.json").read_text()
    assert "sk-test-secret-value" not in stored


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


def test_results_json_carries_metrics_and_stage_attribution(
    evaluated: tuple[Env, list[StageOutcome]],
) -> None:
    env, _ = evaluated
    doc = read_document(env.results / "local-minilm" / DATE / "results.json")
    assert {m.test_id for m in doc.retrieval_metrics} == {r.test_id for r in doc.semantic}
    assert all(0.0 <= m.ndcg_6 <= 1.0 and 0.0 <= m.candidate_recall_15 <= 1.0 for m in doc.retrieval_metrics)
    assert {a.test_id for a in doc.stage_attribution} == {r.test_id for r in doc.semantic if r.hard_fail}


def test_the_samples_critical_evaluation_is_a_green_run_with_a_red_check(env: Env) -> None:
    # The sample data as shipped: three indirect crisis messages its regexes honestly miss.
    for name in ("kb", "test_banks"):
        shutil.copytree(REPO / name, env.root / name)
    env.kb, env.banks = env.root / "kb", env.root / "test_banks"
    (shared, model, _) = run_all(DATE, MODELS, env.resources(), env.instance)
    assert shared.success and model.success and model.failures == []
    assert model.failed_checks == ["release_gate:no_critical_failures"]
    doc = read_document(env.results / "local-minilm" / DATE / "results.json")
    assert doc.aggregate.health.value == "CRITICAL" and len(doc.aggregate.critical_failures) == 3
    statuses = {r.dagster_run.job_name: r.dagster_run.status for r in env.instance.get_run_records()}
    assert set(statuses.values()) == {dg.DagsterRunStatus.SUCCESS}

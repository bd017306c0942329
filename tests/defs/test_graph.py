from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.core.scoring.run_document import read_document
from eval_pipeline.core.verdicts.run_gate import GateDecision
from eval_pipeline.definitions import location
from eval_pipeline.defs.graph import EVALUATION, MATERIALIZABLE
from eval_pipeline.defs.partitions import model_date_key
from eval_pipeline.defs.resources import ProvidersResource
from eval_pipeline.orchestration.execution import run_all
from eval_pipeline.orchestration.stages import StageOutcome
from tests.defs.conftest import REPO, Env, Kept
from tests.embedding_cache import warm

DATE = "2026-11-20"
MODELS = ["local-minilm"]
EVALUATED = {a.key.to_user_string() for a in MATERIALIZABLE}
SECRET = "sk-test-secret-value"
CALIBRATION = {
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
    running = {s.name for s in repo.sensor_defs if s.default_status is dg.DefaultSensorStatus.RUNNING}
    assert running == {"evaluation_automation", "model_partitions", "later_date_diffs"}
    # Declarative Automation evaluates; the schedules only launch backfills (orchestration/schedules.py).
    assert {s.name for s in repo.schedule_defs} == {"daily_evaluation", "comparison_backfill"}
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


@dataclass(frozen=True)
class Evaluated:
    kept: Kept
    outcomes: list[StageOutcome]


def _providers_from_environment(env: Env) -> ProvidersResource:
    return ProvidersResource.from_environment(
        models_file=str(env.models_file), cache_dir=str(env.root / "cache")
    )


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> Evaluated:
    """One evaluation of DATE on the tenant fixture, kept: each test starts from a copy of it.
    An API key is in the environment and a calibration was logged that day, for the tests of each."""
    kept = Kept(tmp_path_factory.mktemp("evaluated") / "project")
    with kept.open() as env, pytest.MonkeyPatch.context() as environment:
        environment.setenv("ANTHROPIC_API_KEY", SECRET)
        environment.delenv("VOYAGE_API_KEY", raising=False)
        log = env.root / "calibration" / "calibration_log.json"
        log.parent.mkdir()
        log.write_text(json.dumps({"schema_version": 1, "records": [CALIBRATION]}))
        resources = {**env.resources(), "providers": _providers_from_environment(env)}
        outcomes = run_all(DATE, MODELS, resources, env.instance)
    kept.keep()
    return Evaluated(kept, outcomes)


def test_full_materialisation_of_one_partition(evaluated: Evaluated) -> None:
    outcomes = evaluated.outcomes
    assert [o.name for o in outcomes] == ["shared", "local-minilm", "comparison"]
    assert all(o.success and o.failures == [] for o in outcomes)
    with evaluated.kept.restore() as env:
        doc = read_document(env.results / "local-minilm" / DATE / "results.json")
        assert (len(doc.semantic), len(doc.state), len(doc.pattern), len(doc.always)) == (8, 3, 4, 2)
        assert doc.provenance.kb_version == "tenant-fixture-1" and doc.provenance.date == DATE
        assert set(doc.provenance.bank_hashes) >= {
            "semantic/tenant_questions.json",
            "pattern/pattern_rules.json",
        }
        assert doc.provenance.inputs_snapshot  # which stored snapshot of the inputs it evaluated
        report = (env.results / "local-minilm" / DATE / "report.md").read_text()
        assert "## Summary" in report and "## Provenance and cost" in report
        for name in EVALUATED:
            assert env.materialisations(name) == 1, name
        # CLI runs are named jobs in the UI, not `__ephemeral_asset_job__`.
        jobs = {r.dagster_run.job_name for r in env.instance.get_run_records()}
        assert jobs == {"evaluate_date", "evaluate_model", "compare_models"}


def _gate(env: Env, model: str = "local-minilm") -> GateDecision:
    return GateDecision.model_validate_json((env.results / model / DATE / "gate.json").read_text())


def test_a_critical_verdict_is_a_successful_run_with_a_failed_check(evaluated: Evaluated) -> None:
    assert all(o.success and o.failures == [] and o.failed_checks == [] for o in evaluated.outcomes)
    with evaluated.kept.restore() as env:
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
        assert env.materialisations("run_report") == 2 and env.materialisations("release_gate") == 2
        gate = _gate(env)
        assert not gate.passed and gate.status == "failed" and gate.reasons == ["1 critical failure(s)"]
        partition = str(model_date_key("local-minilm", DATE))
        records = env.instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("release_gate"), asset_partitions=[partition]),
            limit=1,
        ).records
        latest_gate = records[0].asset_materialization
        assert latest_gate is not None and latest_gate.metadata["passed"].value is False
        doc = read_document(env.results / "local-minilm" / DATE / "results.json")
        assert doc.aggregate.health.value == "CRITICAL"
        assert [c.test_id for c in doc.aggregate.critical_failures] == ["T-PAT-CRISIS-001"]


def test_api_keys_reach_providers_through_envvar_and_never_metadata(
    evaluated: Evaluated, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.delenv("VOYAGE_API_KEY", raising=False)
    with evaluated.kept.restore() as env:
        providers = _providers_from_environment(env)
        # Bound by name (what the UI shows); an unset variable is not bound at all.
        assert isinstance(providers.anthropic_api_key, dg.EnvVar) and providers.voyage_api_key is None

        @dg.asset
        def seen(providers: ProvidersResource) -> dict[str, str]:
            return providers.environ()

        result = dg.materialize([seen], resources={"providers": providers}, instance=env.instance)
        assert result.output_for_node("seen") == {"ANTHROPIC_API_KEY": SECRET}
        # The shared evaluation ran with these providers.
        stored = "".join(
            str(r.asset_materialization.metadata)
            for key in MATERIALIZABLE
            for r in env.instance.fetch_materializations(key.key, limit=100).records
            if r.asset_materialization is not None
        )
        stored += (env.results / "local-minilm" / DATE / "results.json").read_text()
        assert SECRET not in stored


def test_calibration_cost_is_reported_apart_from_the_systems(evaluated: Evaluated) -> None:
    with evaluated.kept.restore() as env:  # the shared evaluation, with CALIBRATION logged
        doc = read_document(env.results / "local-minilm" / DATE / "results.json")
        assert doc.provenance.calibration_cost_usd == 0.25 and doc.aggregate.cost_usd == 0.0
        report = (env.results / "local-minilm" / DATE / "report.md").read_text()
        assert "| Calibration cost that day (not system under test) | $0.2500 |" in report
        assert "| Cost (system under test) | $0.0000 |" in report


def test_results_json_carries_metrics_and_stage_attribution(evaluated: Evaluated) -> None:
    with evaluated.kept.restore() as env:
        doc = read_document(env.results / "local-minilm" / DATE / "results.json")
    assert {m.test_id for m in doc.retrieval_metrics} == {r.test_id for r in doc.semantic}
    assert all(0.0 <= m.ndcg_6 <= 1.0 and 0.0 <= m.candidate_recall_15 <= 1.0 for m in doc.retrieval_metrics)
    assert {a.test_id for a in doc.stage_attribution} == {r.test_id for r in doc.semantic if r.hard_fail}


def test_the_samples_critical_evaluation_is_a_green_run_with_a_red_check(
    env: Env, local_embeddings: Path
) -> None:
    # The sample data as shipped: three indirect crisis messages its regexes honestly miss.
    for name in ("kb", "test_banks"):
        shutil.copytree(REPO / name, env.root / name)
    warm(env.root / "cache", local_embeddings)
    env.kb, env.banks = env.root / "kb", env.root / "test_banks"
    (shared, model, _) = run_all(DATE, MODELS, env.resources(), env.instance)
    assert shared.success and model.success and model.failures == []
    assert model.failed_checks == ["release_gate:no_critical_failures"]
    doc = read_document(env.results / "local-minilm" / DATE / "results.json")
    assert doc.aggregate.health.value == "CRITICAL" and len(doc.aggregate.critical_failures) == 3
    statuses = {r.dagster_run.job_name: r.dagster_run.status for r in env.instance.get_run_records()}
    assert set(statuses.values()) == {dg.DagsterRunStatus.SUCCESS}

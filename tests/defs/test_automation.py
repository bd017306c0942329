"""Declarative Automation over the whole graph: a new day, a KB edit, a history change and a new
model each evaluate exactly what they should, and paid models only when they say so (automation
ticks driven on a virtual clock by tests/defs/automation_driver.py).

Two days are evaluated once for the module, a paid model enabled beside the offline ones
throughout: yesterday with one offline model, then overnight the second is enabled and a
calibration changes one expectation, then today. Each test of today starts from a fresh copy of
that: the paid model stays inert through the history change and the KB edit too."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import dagster as dg
import pytest
import yaml

from eval_pipeline.core.dates import today_utc
from eval_pipeline.core.inputs.banks import Expectations
from eval_pipeline.core.inputs.history_file import HistoryChange, HistoryFile, append_history
from eval_pipeline.core.scoring.run_document import read_document
from eval_pipeline.defs.automation import model_partitions
from eval_pipeline.defs.graph import MATERIALIZABLE
from eval_pipeline.defs.partitions import sync_model_partitions
from tests.defs.automation_driver import Driver
from tests.defs.conftest import Env, Kept

BOTH = ["local-minilm", "local-hybrid"]
NEW_OVERNIGHT = BOTH[1]  # enabled overnight: no partition of its own yesterday
EVALUATED = {a.key.to_user_string() for a in MATERIALIZABLE}


def _driver(env: Env, day: str, models: list[str]) -> Driver:
    """Automation on `day` (just after midnight UTC), the sources already observed once."""
    sync_model_partitions(env.instance, models)
    start = datetime.fromisoformat(day).replace(tzinfo=UTC) + timedelta(minutes=1)
    driver = Driver(env.resources(), env.instance, start)
    driver.tick()  # the first evaluation only starts the cron clock
    return driver


@dataclass(frozen=True)
class Evaluated:
    """Automation's evaluation of yesterday then today, kept; what it requested and where its
    clock is."""

    kept: Kept
    models: list[str]
    first: dict[str, set[str | None]]  # the first cron tick
    # What the model_partitions sensor asked for overnight.
    overnight: list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest]
    settled: set[str]  # what today's evaluation materialised
    failures: list[str]
    now: datetime
    cursor: object


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Evaluated:
    """Yesterday with one offline model (and the paid one); overnight the second offline model is
    enabled and a calibration changes an expectation; then today, every model enabled."""
    kept = Kept(tmp_path_factory.mktemp("today") / "project")
    with kept.open() as env:
        doc = yaml.safe_load(env.models_file.read_text())
        doc["models"]["voyage-haiku"]["enabled"] = True  # a paid model, without `automate: true`
        env.models_file.write_text(yaml.safe_dump(doc, sort_keys=False))
        models = [k for k, m in env.resources()["providers"].models().items() if m.enabled]
        today = date.fromisoformat(today_utc())
        yesterday = (today - timedelta(days=1)).isoformat()
        driver = _driver(env, yesterday, [m for m in models if m != NEW_OVERNIGHT])
        first = driver.tick(minutes=5)
        driver.settle()

        # Overnight: the new model's partitions, added as the model_partitions sensor asks, and a
        # calibration changes one expectation; nothing else.
        result = model_partitions(dg.build_sensor_context(instance=env.instance, resources=env.resources()))
        assert isinstance(result, dg.SensorResult)
        overnight = list(result.dynamic_partitions_requests or [])
        for request in overnight:
            if isinstance(request, dg.AddDynamicPartitionsRequest):
                env.instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        _history_change(env, datetime.now(UTC), "repair_requests", test_id="T-MOULD-001")
        driver.now = datetime.fromisoformat(today.isoformat()).replace(tzinfo=UTC)
        settled = driver.settle()
    kept.keep()
    return Evaluated(kept, models, first, overnight, settled, driver.failures, driver.now, driver.cursor)


def _today(env: Env, key: str) -> int:
    """How many times `key` was materialised for today's partitions."""
    day = today_utc()
    records = env.instance.fetch_materializations(dg.AssetKey(key), limit=1000).records
    return sum(1 for r in records if day in str(r.partition_key).split("|"))


def _resume(env: Env, started: Evaluated) -> Driver:
    """Automation carrying on from today's evaluation, on its restored copy `env`."""
    return Driver(env.resources(), env.instance, started.now, started.cursor)


def _history_change(env: Env, when: datetime, primary: str, test_id: str = "T-RENT-001") -> None:
    change = HistoryChange(test_id=test_id, updated=Expectations(expected_primary=[primary]))
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


def test_automation_evaluates_a_new_day_then_a_history_change_rescores_without_retrieving(
    started: Evaluated,
) -> None:
    assert started.first == {"input_files": {None}, "history_files": {None}}  # the cron
    assert started.settled == EVALUATED and started.failures == []
    day = today_utc()
    with started.kept.restore() as env:
        driver = _resume(env, started)
        for model in BOTH:
            names = {p.name for p in (env.results / model / day).iterdir()}
            assert {
                "results.json",
                "report.md",
                "gate.json",
                "regression_diff.md",
                "model_comparison.md",
            } <= names
        assert _today(env, "model_comparison") == 1
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
        assert _today(env, "semantic_retrievals") == 2  # one per model, from the first run only
        assert _today(env, "semantic_results") == 4  # first run, then both models re-scored
        doc = read_document(env.results / "local-minilm" / day / "results.json")
        rent = next(r for r in doc.semantic if r.test_id == "T-RENT-001")
        assert rent.expectation_source == f"opus_{day}"
        assert rent.expectations.expected_primary == ["lease_renewal"]


def test_a_kb_edit_reretrieves_and_leaves_history_alone(started: Evaluated) -> None:
    with started.kept.restore() as env:
        driver = _resume(env, started)
        env.kb.write_text(
            env.kb.read_text().replace("kb_version: tenant-fixture-1", "kb_version: tenant-fixture-2")
        )
        driver.tick(minutes=5)
        requested = driver.settle()
        assert driver.failures == []
        assert {"input_snapshot", "knowledge_base", "semantic_retrievals", "run_report"} <= requested
        assert "expectation_history" not in requested  # the history did not change
        for model in BOTH:
            doc = read_document(env.results / model / today_utc() / "results.json")
            assert doc.provenance.kb_version == "tenant-fixture-2"


def test_a_new_model_and_a_new_day_with_only_a_history_change_evaluate_without_error(
    started: Evaluated,
) -> None:
    today = date.fromisoformat(today_utc())
    yesterday = (today - timedelta(days=1)).isoformat()
    (added,) = started.overnight
    assert isinstance(added, dg.AddDynamicPartitionsRequest) and list(added.partition_keys) == [NEW_OVERNIGHT]
    assert started.failures == [] and started.settled == EVALUATED
    with started.kept.restore() as env:
        assert (env.results / "local-minilm" / yesterday / "report.md").is_file()
        assert not (env.results / NEW_OVERNIGHT / yesterday).exists()
        for model in BOTH:
            assert (env.results / model / today.isoformat() / "report.md").is_file()
        diff = json.loads(
            (env.results / "local-minilm" / today.isoformat() / "regression_diff.json").read_text()
        )
        assert diff["baseline_date"] == yesterday
        fresh = json.loads(
            (env.results / "local-hybrid" / today.isoformat() / "regression_diff.json").read_text()
        )
        assert fresh["baseline_date"] is None  # a new model has no yesterday: said, not an error


def test_automation_never_spends_money_unless_the_model_says_so(started: Evaluated) -> None:
    assert started.models == [*BOTH, "voyage-haiku"]
    assert started.failures == []
    paid = next(m for m in started.models if m not in BOTH)
    with started.kept.restore() as env:
        assert not (env.results / paid).exists()  # skipped, nothing downstream waits on it
        comparison = json.loads(
            (env.results / "_comparison" / today_utc() / "model_comparison.json").read_text()
        )
        assert {m["model"] for m in comparison["models"]} == set(BOTH)

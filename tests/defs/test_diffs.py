from __future__ import annotations

import json
import re

import dagster as dg
import pytest

from eval_pipeline.core.diff.baseline import RegressionDiff, baseline_label
from eval_pipeline.core.diff.comparison import ModelComparison
from eval_pipeline.core.diff.model import DeltaKind
from eval_pipeline.core.scoring.run_document import RunDocument, read_document
from eval_pipeline.defs.automation import date_job, later_date_diffs, model_job, rediff_job
from eval_pipeline.defs.diffs import DIFF_ASSETS, model_comparison, regression_diff
from eval_pipeline.defs.graph import ALL_ASSETS
from eval_pipeline.defs.partitions import model_date_key
from eval_pipeline.orchestration.execution import run_all
from eval_pipeline.orchestration.stages import QUIET_LOGS, evaluation_definitions, run_stage
from tests.defs.conftest import Env, Kept

D1, D2 = "2026-11-20", "2026-11-21"
MINILM = "local-minilm"
BOTH = [MINILM, "local-hybrid"]
NOISE_CONTENT = (
    "Start with a calm, friendly word at a good moment. Keep a noise diary with dates and\n"
    "      times. If it continues, tell your landlord or the building manager in writing."
)


@pytest.fixture(scope="module")
def first_day(tmp_path_factory: pytest.TempPathFactory) -> Kept:
    """Both models evaluated on D1, kept: each test starts from a copy of it."""
    kept = Kept(tmp_path_factory.mktemp("first_day") / "project")
    with kept.open() as env:
        run_all(D1, BOTH, env.resources(), env.instance)
    kept.keep()
    return kept


def _materialise(
    env: Env, asset: dg.AssetsDefinition, key: str | dg.MultiPartitionKey
) -> dg.ExecuteInProcessResult:
    # The diff assets are passed in here: graph.py registers them only once the lead wires them in.
    result = dg.materialize(
        [*ALL_ASSETS, *DIFF_ASSETS],
        selection=[asset],
        partition_key=key,
        resources=env.resources(),
        instance=env.instance,
        run_config=QUIET_LOGS,
    )
    assert result.success
    return result


def _metadata(result: dg.ExecuteInProcessResult) -> dict[str, object]:
    (event,) = result.get_asset_materialization_events()
    return {k: getattr(v, "value", v) for k, v in event.materialization.metadata.items()}


def _retrieval(doc: RunDocument) -> dict[str, tuple[object, ...]]:
    return {r.test_id: (r.selections, [c.entity_id for c in r.candidates]) for r in doc.semantic}


def test_regression_diff_has_an_explicit_no_baseline_then_shows_exactly_the_tests_a_kb_edit_moved(
    first_day: Kept,
) -> None:
    with first_day.restore() as env:
        first = _materialise(env, regression_diff, model_date_key(MINILM, D1))
        value = first.output_for_node("regression_diff")
        assert isinstance(value, RegressionDiff) and value.diff is None and value.baseline_date is None
        assert _metadata(first)["baseline"] == "no baseline" and _metadata(first)["regressed"] == "0"

        kb = env.kb.read_text()
        env.kb.write_text(
            kb.replace(NOISE_CONTENT, "Late rent, arrears and repayment plans for money trouble.")
        )
        run_all(D2, [MINILM], env.resources(), env.instance)
        second = _materialise(env, regression_diff, model_date_key(MINILM, D2))
        result = second.output_for_node("regression_diff")
        assert isinstance(result, RegressionDiff) and result.baseline_date == D1 and result.diff is not None
        assert _metadata(second)["baseline"] == baseline_label(result)

        before = _retrieval(read_document(env.results / MINILM / D1 / "results.json"))
        after = _retrieval(read_document(env.results / MINILM / D2 / "results.json"))
        moved = {t for t in after if before[t] != after[t]}
        flagged = {d.test_id for d in result.diff.deltas if d.kind is not DeltaKind.UNCHANGED}
        assert moved and flagged == moved
        # A test whose top 15 only reordered is cosmetic: no cause; every other moved test is the system's.
        for d in result.diff.deltas:
            if d.test_id in moved:
                assert d.causes == ([] if d.kind is DeltaKind.COSMETIC else ["system_changed"])
        assert result.diff.warnings[0].startswith("KB differs: tenant-fixture-1")

        out = env.results / MINILM / D2
        saved = RegressionDiff.model_validate_json((out / "regression_diff.json").read_text())
        assert saved == result
        assert (out / "regression_diff.md").read_text().startswith(f"# Regression diff — {MINILM} — {D2}")
        assert _metadata(second)["verdict"] == result.verdict
        # Its HTML twin: the model's two dates as one combined line, and the same "since last run".
        html = (out / "report.html").read_text()
        combined = re.search(rf'data-model="{MINILM}" data-bank="combined" d="([^"]*)"', html)
        assert (
            combined is not None and combined.group(1).count("M") == 1 and combined.group(1).count("L") == 1
        )
        assert f"<h3>{MINILM}: {D1} → {D2}</h3>" in html
        assert f"Baseline: {MINILM} @ {baseline_label(result)}" in html
        assert "no baseline" in (env.results / MINILM / D1 / "report.html").read_text()


def test_model_comparison_reads_every_model_of_the_date(first_day: Kept) -> None:
    with first_day.restore() as env:
        result = _materialise(env, model_comparison, D1)
        comparison = result.output_for_node("model_comparison")
        assert isinstance(comparison, ModelComparison)
        assert [m.model for m in comparison.models] == [MINILM, "local-hybrid"]  # models-file order
        (pair,) = comparison.pairs
        assert (pair.base.model, pair.head.model) == (MINILM, "local-hybrid")
        assert sum(pair.counts.values()) == 8 + 3 + 4 + 2  # every test of the tenant banks
        out = env.results / "_comparison" / D1
        assert json.loads((out / "model_comparison.json").read_text())["date"] == D1
        assert (out / "model_comparison.md").read_text().startswith(f"# Model comparison — {D1}")
        metadata = _metadata(result)
        assert metadata["models"] == f"{MINILM}, local-hybrid" and "points per test" in str(
            metadata["verdict"]
        )


def test_a_diff_launched_before_its_date_is_reported_completes_without_a_red_run(first_day: Kept) -> None:
    # What automation does when a past date (D1) is evaluated and D2, the latest date, has no
    # report yet: it launches D2's diff, which has nothing to compare. That is no error.
    with first_day.restore() as env:
        result = dg.materialize(
            [*ALL_ASSETS, *DIFF_ASSETS],
            selection=[regression_diff],
            partition_key=model_date_key(MINILM, D2),
            resources=env.resources(),
            instance=env.instance,
            run_config=QUIET_LOGS,
            tags={"dagster/from_automation_condition": "true"},
            raise_on_error=False,
        )
        assert result.success
        assert result.get_asset_materialization_events() == []
        (check,) = result.get_asset_check_evaluations()
        assert check.passed and "has no report yet" in str(check.metadata["compared_with"].value)
        failed = env.instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE]))
        assert failed == []
        assert not (env.results / MINILM / D2).exists()


def test_an_earlier_date_evaluated_later_becomes_the_next_date_s_baseline(first_day: Kept) -> None:
    # D1 had no baseline; D2 compares with D1. Then an earlier date (D0, as a backfill does) is
    # evaluated: its next later evaluation, D1, now compares with it; D2 keeps D1.
    d0 = "2026-11-12"
    with first_day.restore() as env:
        run_all(D2, [MINILM], env.resources(), env.instance)
        stored = env.results / MINILM / D1
        assert (
            RegressionDiff.model_validate_json((stored / "regression_diff.json").read_text()).baseline_date
            is None
        )
        outcomes = run_all(d0, [MINILM], env.resources(), env.instance)
        assert all(not o.failures for o in outcomes)
        again = RegressionDiff.model_validate_json((stored / "regression_diff.json").read_text())
        assert again.baseline_date == d0 and again.baseline_age_days == 8
        assert f"## Since last run ({d0}, 8 days earlier)" in (stored / "report.md").read_text()
        assert f"Baseline: {MINILM} @ {d0}, 8 days earlier" in (stored / "report.html").read_text()
        later = env.results / MINILM / D2 / "regression_diff.json"
        assert RegressionDiff.model_validate_json(later.read_text()).baseline_date == D1


def _tick(env: Env, cursor: str | None = None) -> dg.SensorResult:
    context = dg.build_sensor_context(instance=env.instance, resources=env.resources(), cursor=cursor)
    result = later_date_diffs(context)
    assert isinstance(result, dg.SensorResult)
    return result


def test_an_earlier_date_evaluated_outside_the_command_line_is_followed_by_the_sensor(
    first_day: Kept,
) -> None:
    # What a backfill launched from the UI runs: the date's stage and the model's, with none of
    # the command line's follow-up. The sensor asks for D1's diff again, once.
    d0 = "2026-11-12"
    with first_day.restore() as env:
        defs = evaluation_definitions(env.resources())
        for job, key in ((date_job.name, d0), (model_job.name, model_date_key(MINILM, d0))):
            assert not run_stage(job, job, key, defs, env.instance).failures
        stored = env.results / MINILM / D1 / "regression_diff.json"
        assert RegressionDiff.model_validate_json(stored.read_text()).baseline_date is None

        tick = _tick(env)
        (request,) = tick.run_requests or ()
        assert request.partition_key == str(model_date_key(MINILM, D1))
        assert not run_stage("rediff", rediff_job.name, request.partition_key, defs, env.instance).failures
        assert RegressionDiff.model_validate_json(stored.read_text()).baseline_date == d0

        # Idempotent: the next tick, and a sensor started afresh over the whole history, ask for nothing.
        assert _tick(env, tick.cursor).run_requests == _tick(env).run_requests == []

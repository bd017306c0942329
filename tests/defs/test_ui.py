"""What the Dagster UI shows: one plotted series per model on the date asset, numbers rounded
to what a reader needs, every asset and check described, partitions from the project's first
date, and hints that name pages the installed webserver has."""

from __future__ import annotations

import re
from pathlib import Path

import dagster as dg
import dagster_webserver
import pytest

from eval_pipeline.core.rounding import fmt_score, shown_score
from eval_pipeline.core.scoring.run_document import COMPARISON_DIR, RESULTS_FILE, read_document
from eval_pipeline.definitions import location
from eval_pipeline.defs.diffs import SHOWN_AGAIN_AFTER
from eval_pipeline.defs.graph import MATERIALIZABLE
from eval_pipeline.defs.metadata import readable, rounded
from eval_pipeline.defs.partitions import model_date_key, model_date_partitions
from eval_pipeline.orchestration.execution import run_all
from tests.defs.conftest import REPO, Env

DATES = ["2026-11-20", "2026-11-21"]
MODELS = ["local-minilm", "local-hybrid"]
NUMBERS = (dg.FloatMetadataValue, dg.IntMetadataValue)


@pytest.fixture(scope="module")
def evaluated(shared_env: Env) -> Env:
    """Two models on two dates, as `run` evaluates them, on the tenant fixture."""
    for day in DATES:
        outcomes = run_all(day, MODELS, shared_env.resources(), shared_env.instance)
        assert all(o.success and not o.failures for o in outcomes)
    return shared_env


def _latest(env: Env, asset: str, partition: str) -> dict[str, dg.MetadataValue]:
    records = env.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition]), limit=1
    ).records
    materialization = records[0].asset_materialization
    assert materialization is not None
    return dict(materialization.metadata)


def test_each_models_scores_are_series_of_their_own_on_the_date_asset(evaluated: Env) -> None:
    for day in DATES:
        meta = _latest(evaluated, "model_comparison", day)
        for model in MODELS:
            agg = read_document(evaluated.results / model / day / RESULTS_FILE).aggregate
            assert agg.combined_score is not None
            score = meta[f"score/{model}"]
            assert isinstance(score, dg.FloatMetadataValue)
            assert score.value == shown_score(agg.combined_score)
            for mechanism, bank in agg.banks.items():
                assert bank.average is not None
                assert meta[f"score_{mechanism.value}/{model}"].value == shown_score(bank.average)
            assert meta[f"hard_fails/{model}"] == dg.IntMetadataValue(agg.hard_fail_count)
            assert meta[f"cost_usd/{model}"] == dg.FloatMetadataValue(round(agg.cost_usd, 4))
    # The model x date assets still show their scores, as text: plotted, they would zig-zag.
    key = str(model_date_key(MODELS[1], DATES[1]))
    agg = read_document(evaluated.results / MODELS[1] / DATES[1] / RESULTS_FILE).aggregate
    assert agg.combined_score is not None
    for asset in ("run_report", "scored_aggregate"):
        shown = _latest(evaluated, asset, key)["combined_score"]
        assert shown == dg.TextMetadataValue(fmt_score(agg.combined_score))
    # The files a reader opens show the very same figure.
    report = (evaluated.results / MODELS[1] / DATES[1] / "report.md").read_text()
    assert f"**{fmt_score(agg.combined_score)}**" in report
    comparison = (evaluated.results / COMPARISON_DIR / DATES[1] / "model_comparison.md").read_text()
    assert f"| {fmt_score(agg.combined_score)} |" in comparison


def test_every_number_stored_is_rounded_and_only_date_level_assets_plot(evaluated: Env) -> None:
    floats, plotted = 0, set()
    for asset in MATERIALIZABLE:
        by_model = asset.partitions_def == model_date_partitions
        for record in evaluated.instance.fetch_materializations(asset.key, limit=100).records:
            assert record.asset_materialization is not None
            for key, value in record.asset_materialization.metadata.items():
                if by_model:
                    assert not isinstance(value, NUMBERS), (asset.key, key)
                elif isinstance(value, NUMBERS):
                    plotted.add(asset.key.to_user_string())
                if isinstance(value, dg.FloatMetadataValue) and value.value is not None:
                    floats += 1
                    assert value.value == rounded(key, value.value), (asset.key, key, value.value)
    assert floats > 0 and "model_comparison" in plotted


def test_each_check_names_the_partition_it_checked(evaluated: Env) -> None:
    """The UI's check history shows which model x date (or date) failed, not "Partition —"."""
    checked = {
        ("release_gate", "no_critical_failures"): {str(model_date_key(m, d)) for m in MODELS for d in DATES},
        ("regression_diff", "no_new_hard_fails"): {str(model_date_key(m, DATES[1])) for m in MODELS},
        ("always_results", "always_entities_present"): set(DATES),
    }
    for (asset, check), partitions in checked.items():
        key = dg.AssetCheckKey(dg.AssetKey(asset), check)
        records = evaluated.instance.event_log_storage.get_asset_check_execution_history(key, limit=20)
        assert partitions <= {r.partition for r in records}, (asset, check)


def test_the_comparisons_overview_stays_on_the_latest_date_after_an_earlier_one(env: Env) -> None:
    """The overview shows the asset's latest event: a past date evaluated later (a backfill)
    must not take it from the newest date's comparison."""
    for day in reversed(DATES):
        assert all(o.success for o in run_all(day, MODELS, env.resources(), env.instance))
    records = env.instance.fetch_materializations(dg.AssetKey("model_comparison"), limit=3).records
    latest, earlier = (r.asset_materialization for r in records[:2])
    assert latest is not None and earlier is not None
    assert (latest.partition, earlier.partition) == (DATES[1], DATES[0])
    assert latest.metadata[SHOWN_AGAIN_AFTER] == dg.TextMetadataValue(DATES[0])
    first = records[2].asset_materialization
    assert first is not None and first.partition == DATES[1]
    assert {k: v for k, v in latest.metadata.items() if k != SHOWN_AGAIN_AFTER} == first.metadata


def test_command_line_runs_are_named_jobs(evaluated: Env) -> None:
    runs = evaluated.instance.get_run_records()
    assert len(runs) == len(DATES) * (len(MODELS) + 2)  # each date: shared, each model, comparison
    assert {r.dagster_run.job_name for r in runs} == {"evaluate_date", "evaluate_model", "compare_models"}


def test_rounding_to_what_a_reader_needs() -> None:
    assert rounded("combined_score", 87.33333333333333) == 87.3
    assert rounded("combined_score", 89.26) == 89.2  # as report.md shows it, not 89.3
    assert rounded("score_semantic/m", 100.0) == 100.0
    assert rounded("percent_agreement", 66.6666) == 66.7
    assert rounded("cost_usd", 0.012345678) == 0.0123
    assert rounded("kappa", 0.81234) == 0.812
    assert rounded("mean_latency_ms", 1234.5) == 1230.0
    assert rounded("min_cache_read_coverage", 0.000123456) == 0.000123
    assert rounded("kappa", 0.0) == 0.0
    shown = readable({"tests": 8, "passed": True, "cost_usd": 0.123456, "note": "x"}, plotted=False)
    assert shown == {
        "tests": dg.TextMetadataValue("8"),
        "passed": True,
        "cost_usd": dg.TextMetadataValue("0.1235"),
        "note": "x",
    }


def test_every_asset_and_every_check_is_described() -> None:
    graph = location().resolve_asset_graph()
    undescribed = [k.to_user_string() for k in graph.get_all_asset_keys() if not graph.get(k).description]
    assert undescribed == []
    checks = graph.asset_check_keys
    assert len(checks) >= 4
    assert [str(k) for k in checks if not graph.get_check_spec(k).description] == []


# A UI path named in a hint or a page -> what the installed webserver's app routes it by.
UI_PAGES = {
    "Runs > Backfills": "view=backfills",
    "Deployment > Concurrency": '"/deployment/concurrency',
}
UI_PATH = re.compile(r"\b(?:Overview|Runs|Catalog|Assets|Jobs|Automation|Deployment|Settings) > [A-Z][a-z]+")


def test_hints_name_pages_the_installed_ui_has() -> None:
    named = {
        match.group(0)
        for folder in ("eval_pipeline", "docs")
        for path in sorted((REPO / folder).rglob("*"))
        if path.suffix in {".py", ".md"}
        for match in UI_PATH.finditer(path.read_text(encoding="utf-8"))
    }
    assert named and named <= set(UI_PAGES), named - set(UI_PAGES)
    bundle = Path(dagster_webserver.__file__).parent / "webapp" / "build"
    app = "".join(p.read_text(errors="ignore") for p in bundle.rglob("*.js"))
    assert [page for page, route in UI_PAGES.items() if route not in app] == []

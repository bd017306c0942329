"""`eval-pipeline backfill`: the backfill the command submits, for the second domain's data (the
code location reads its paths from the environment), carried out by Dagster's asset-backfill
machinery on a fresh instance, as the command carries it out when no daemon runs
(orchestration/backfill.py): Dagster's backfill iterations back to back, each run they
submit executed in this process. The command itself runs end to end in
tests/orchestration/test_daemon_and_fresh_instance.py and tests/deploy/test_postgres_instance.py."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._core.execution.backfill import BulkActionStatus

from eval_pipeline.cli import main
from eval_pipeline.cli.backfill import _follow_later_dates, _verdicts
from eval_pipeline.core.dates import days_before, today_utc
from eval_pipeline.core.scoring.run_document import (
    COMPARISON_FILE,
    GATE_FILE,
    REGRESSION_DIFF_FILE,
    RESULTS_FILE,
)
from eval_pipeline.definitions import location
from eval_pipeline.orchestration.backfill import (
    BACKFILL_TAG,
    ENDED,
    backfill_driver,
    backfill_targets,
    progress,
    submit_backfill,
)
from eval_pipeline.orchestration.instance_storage import storage_config
from eval_pipeline.providers.object_store import output_path
from tests.defs.observations import observed_on

REPO = Path(__file__).resolve().parents[1]
D1, D2 = "2026-11-10", "2026-11-11"
MORNING_OF_D1 = datetime(2026, 11, 10, 8, tzinfo=UTC)
MODELS = ["local-minilm", "local-hybrid"]


# The project's SQLite storage, as `backfill` opens it (Dagster's own opens a database engine for
# every statement: most of a materialisation's CPU here).
def instance_settings(home: Path) -> str:
    return str(yaml.safe_dump({"telemetry": {"enabled": False}, "storage": storage_config(str(home))}))


@pytest.fixture
def project(tenant: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copy(REPO / "models.yaml", tmp_path / "models.yaml")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.setenv("EVAL_PIPELINE_KB", str(tenant / "kb.yaml"))
    monkeypatch.setenv("EVAL_PIPELINE_BANKS_DIR", str(tenant / "banks"))
    for key in ("ANTHROPIC_API_KEY", "VOYAGE_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    return tmp_path


def _carry_out(instance: dg.DagsterInstance, backfill_id: str, max_iterations: int = 20) -> int:
    """Iterate the backfill as the command does until it ends; how many iterations it took."""
    status = None
    with backfill_driver(instance) as iterate:
        for iteration in range(1, max_iterations + 1):
            assert iterate(backfill_id) == []
            status = progress(instance, backfill_id, 0).status
            if status in ENDED:
                return iteration
    raise AssertionError(f"backfill {backfill_id} still {status} after {max_iterations} iterations")


def test_backfill_evaluates_diffs_and_compares_two_past_dates(
    project: Path, tenant: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The sources were observed on the first morning; the KB was edited since. Both backfilled
    # dates must evaluate the snapshot current at their end, not today's files.
    home = project / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(instance_settings(home))
    kb = tenant / "kb.yaml"
    with dg.DagsterInstance.from_config(str(home)) as instance:
        seen = observed_on(instance, project / "storage" / "snapshots", kb, tenant / "banks", MORNING_OF_D1)
    kb.write_text(kb.read_text().replace("kb_version: tenant-fixture-1", "kb_version: tenant-fixture-2"))

    with dg.DagsterInstance.from_config(str(home)) as instance:
        # What `eval-pipeline backfill --from D1 --to D2 --model ...` submits.
        backfill_id = submit_backfill(instance, location().resolve_asset_graph(), [D1, D2], MODELS)
        total = len(backfill_targets([D1, D2], MODELS))
        iterations = _carry_out(instance, backfill_id)
        # One iteration per dependency level, as the daemon would take them: the dates' inputs and
        # mechanisms; each model x date through report and gate; the diffs and comparisons (they
        # read other partitions' reports); then the iteration that finds the backfill done.
        assert iterations == 4
        state = progress(instance, backfill_id, total)
        assert (state.status, state.done, state.failed_runs) == (
            BulkActionStatus.COMPLETED_SUCCESS,
            total,
            [],
        )

        (backfill,) = instance.get_backfills()
        assert backfill.backfill_id == backfill_id and backfill.tags[BACKFILL_TAG] == f"{D1}..{D2}"
        runs = instance.get_runs()
        # Every run is the backfill's (dependency order is Dagster's, not ours), and it succeeded.
        assert runs and all(r.tags.get("dagster/backfill") == backfill_id for r in runs)
        assert all(r.status is dg.DagsterRunStatus.SUCCESS for r in runs)
        assert {D1, D2} == {r.tags["dagster/partition"].split("|")[0] for r in runs}

    capsys.readouterr()
    code = _verdicts([D1, D2], MODELS, project / "results")
    out = capsys.readouterr().out
    for date in (D1, D2):
        for model in MODELS:
            run_dir = project / "results" / model / date
            for name in (RESULTS_FILE, "report.md", GATE_FILE, REGRESSION_DIFF_FILE, COMPARISON_FILE):
                assert (run_dir / name).is_file(), run_dir / name
            assert f"{date} {model}: " in out
        comparison = json.loads((project / "results" / "_comparison" / date / COMPARISON_FILE).read_text())
        assert [m["model"] for m in comparison["models"]] == MODELS
    for date in (D1, D2):
        provenance = json.loads((project / "results" / MODELS[0] / date / RESULTS_FILE).read_text())[
            "provenance"
        ]
        assert provenance["kb_version"] == "tenant-fixture-1"
        assert provenance["inputs_snapshot"].startswith(seen[:12])
    for model in MODELS:
        first = json.loads((project / "results" / model / D1 / REGRESSION_DIFF_FILE).read_text())
        second = json.loads((project / "results" / model / D2 / REGRESSION_DIFF_FILE).read_text())
        assert first["baseline_date"] is None and second["baseline_date"] == D1
    gates = [
        json.loads((project / "results" / m / d / GATE_FILE).read_text())["passed"]
        for m in MODELS
        for d in (D1, D2)
    ]
    assert code == (0 if all(gates) else 1)


def test_a_backfill_before_today_s_evaluation_becomes_its_baseline(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Today evaluated first ("no baseline"), then a date 12 days back as `backfill` evaluates it:
    # what the command does once the backfill ends gives today's comparison that baseline.
    home = project / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(instance_settings(home))
    model, today = MODELS[0], today_utc()
    past = days_before(today, 12)
    data = ["--kb", os.environ["EVAL_PIPELINE_KB"], "--banks-dir", os.environ["EVAL_PIPELINE_BANKS_DIR"]]
    assert main(["run", "--model", model, *data]) in (0, 1), capsys.readouterr().err
    stored = project / "results" / model / today
    assert json.loads((stored / REGRESSION_DIFF_FILE).read_text())["baseline_date"] is None
    with dg.DagsterInstance.from_config(str(home)) as instance:
        backfill_id = submit_backfill(instance, location().resolve_asset_graph(), [past], [model])
        _carry_out(instance, backfill_id)
    assert _follow_later_dates(past, [model], output_path(project / "results")) == 0
    diff = json.loads((stored / REGRESSION_DIFF_FILE).read_text())
    assert (diff["baseline_date"], diff["baseline_age_days"]) == (past, 12)
    assert f"## Since last run ({past}, 12 days earlier)" in (stored / "report.md").read_text()
    assert f"Baseline: {model} @ {past}, 12 days earlier" in (stored / "report.html").read_text()
    capsys.readouterr()


def test_a_backfill_canceled_in_the_ui_stops_at_the_next_iteration(project: Path) -> None:
    home = project / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(instance_settings(home))
    with dg.DagsterInstance.from_config(str(home)) as instance:
        backfill_id = submit_backfill(instance, location().resolve_asset_graph(), [D1], MODELS[:1])
        with backfill_driver(instance) as iterate:
            assert iterate(backfill_id) == []  # the date's inputs and deterministic mechanisms
            ran = instance.get_runs_count()
            backfill = instance.get_backfill(backfill_id)
            assert backfill is not None and ran > 0
            # What the UI's "Cancel backfill" does (dagster-graphql's cancelPartitionBackfill).
            instance.update_backfill(backfill._replace(status=BulkActionStatus.CANCELING))
            assert iterate(backfill_id) == []
        state = progress(instance, backfill_id, len(backfill_targets([D1], MODELS[:1])))
        assert state.status is BulkActionStatus.CANCELED and state.done < state.total
        assert instance.get_runs_count() == ran  # nothing submitted after the cancel


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from", D2, "--to", D1], f"--to ({D1}) is before --from ({D2})"),
        (["--from", "2026-13-01"], "--from: '2026-13-01' is not YYYY-MM-DD"),
        (["--from", "2020-01-01"], "--from: must be between"),
        (["--from", D1, "--model", "nope"], "--model: unknown model(s) nope"),
        (["--from", D1, "--timeout", "0"], "--timeout: 0 is out of range (must be > 0)"),
        (["--from", D1, "--timeout", "nan"], "--timeout: nan is not a finite number"),
    ],
)
def test_backfill_input_errors_are_one_line_and_submit_nothing(
    project: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["backfill", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not (project / "dagster_home").exists()  # nothing submitted, no instance made

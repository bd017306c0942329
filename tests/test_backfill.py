"""`eval-pipeline backfill`: a real asset backfill, run by a real Dagster daemon, on a fresh
instance, for the second domain's data (the code location reads its paths from the environment)."""

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

from eval_pipeline.cli import main
from eval_pipeline.core.report.run_document import (
    COMPARISON_FILE,
    GATE_FILE,
    REGRESSION_DIFF_FILE,
    RESULTS_FILE,
)
from eval_pipeline.defs.automation_conditions import AUTOMATION_RUN_TAG
from eval_pipeline.defs.backfill import BACKFILL_TAG
from tests.defs.observations import observed_on

REPO = Path(__file__).resolve().parents[1]
D1, D2 = "2026-11-10", "2026-11-11"
MORNING_OF_D1 = datetime(2026, 11, 10, 8, tzinfo=UTC)
MODELS = ["local-minilm", "local-hybrid"]


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


def test_backfill_evaluates_diffs_and_compares_two_past_dates_through_the_daemon(
    project: Path, tenant: Path
) -> None:
    # The sources were observed on the first morning; the KB was edited since. Both backfilled
    # dates must evaluate the snapshot current at their end, not today's files.
    home = project / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    kb = tenant / "kb.yaml"
    with dg.DagsterInstance.from_config(str(home)) as instance:
        seen = observed_on(instance, project / "storage" / "snapshots", kb, tenant / "banks", MORNING_OF_D1)
    kb.write_text(kb.read_text().replace("kb_version: tenant-fixture-1", "kb_version: tenant-fixture-2"))

    command = [
        sys.executable,
        "-m",
        "eval_pipeline.cli",
        "backfill",
        "--from",
        D1,
        "--to",
        D2,
        "--timeout",
        "15",
    ]
    for model in MODELS:
        command += ["--model", model]
    done = subprocess.run(
        command, cwd=project, env=dict(os.environ), capture_output=True, text=True, timeout=1200
    )
    out = done.stdout
    assert done.returncode in (0, 1), done.stderr + (project / "storage" / "daemon.log").read_text()[-3000:]
    assert "started a Dagster daemon" in out and "backfill completed_success" in out

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
    assert done.returncode == (0 if all(gates) else 1)

    with dg.DagsterInstance.from_config(str(project / "dagster_home")) as instance:
        backfills = instance.get_backfills()
        (backfill,) = [b for b in backfills if BACKFILL_TAG in b.tags]
        assert backfill.status.value == "COMPLETED_SUCCESS"
        # Any other backfill is the daemon's automation evaluating today on its cron (a long,
        # loaded run can outlast a tick), never a second one of ours.
        automation = {b.backfill_id for b in backfills if b.tags.get(AUTOMATION_RUN_TAG) == "true"}
        assert {b.backfill_id for b in backfills} == {backfill.backfill_id} | automation
        runs = instance.get_runs()
        ours = [r for r in runs if r.tags.get("dagster/backfill") == backfill.backfill_id]
        # The backfill daemon launched the evaluation (dependency order is Dagster's, not ours).
        assert ours and all(r.status is dg.DagsterRunStatus.SUCCESS for r in ours)
        others = [r for r in runs if r not in ours]
        assert all(
            r.tags.get(AUTOMATION_RUN_TAG) == "true" or r.tags.get("dagster/backfill") in automation
            for r in others
        )
        assert {D1, D2} <= {r.tags.get("dagster/partition", "").split("|")[0] for r in ours}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from", D2, "--to", D1], f"--to ({D1}) is before --from ({D2})"),
        (["--from", "2026-13-01"], "--from: '2026-13-01' is not YYYY-MM-DD"),
        (["--from", "2020-01-01"], "--from: must be between"),
        (["--from", D1, "--model", "nope"], "--model: unknown model(s) nope"),
        (["--from", D1, "--timeout", "0"], "--timeout: must be more than 0"),
    ],
)
def test_backfill_input_errors_are_one_line_and_submit_nothing(
    project: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["backfill", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not (project / "dagster_home").exists()  # nothing submitted, no instance made

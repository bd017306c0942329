"""`eval-pipeline backfill`: a real asset backfill, run by a real Dagster daemon, on a fresh
instance, for the second domain's data (the code location reads its paths from the environment)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
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

REPO = Path(__file__).resolve().parents[1]
D1, D2 = "2026-11-10", "2026-11-11"
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


def test_backfill_evaluates_diffs_and_compares_two_past_dates_through_the_daemon(project: Path) -> None:
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
        (backfill,) = instance.get_backfills()
        assert backfill.status.value == "COMPLETED_SUCCESS"
        runs = instance.get_runs()
        ours = [r for r in runs if r.tags.get("dagster/backfill") == backfill.backfill_id]
        # The backfill daemon launched the evaluation (dependency order is Dagster's, not ours);
        # any other run is the daemon's automation evaluating today on its cron.
        assert ours and all(r.status is dg.DagsterRunStatus.SUCCESS for r in ours)
        assert all(r.tags.get(AUTOMATION_RUN_TAG) == "true" for r in runs if r not in ours)
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
    assert not (project / "dagster_home").exists()

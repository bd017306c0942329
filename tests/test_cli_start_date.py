"""The dates `run` and `backfill` take, with the first date derived from the project (no setting):
a past day lowers it for the command's process, within a year back and never after today; a
wrong setting, a date out of range, and a backfill a running daemon could not hold are one line
and exit 2. In process and without an evaluation (`run --dry-run` stops before any)."""

from __future__ import annotations

import os
import time
from datetime import date, timedelta
from pathlib import Path

import pytest
from dagster._daemon.types import DaemonHeartbeat

from eval_pipeline.cli import main
from eval_pipeline.cli.run import MAX_DAYS_BACK
from eval_pipeline.core.dates import today_utc
from eval_pipeline.location import START_DATE_ENV
from eval_pipeline.orchestration.execution import project_instance

DATA = ["--kb", "tenant/kb.yaml", "--banks-dir", "tenant/banks", "--model", "local-minilm"]


def _days_ago(n: int) -> str:
    return (date.fromisoformat(today_utc()) - timedelta(days=n)).isoformat()


@pytest.fixture
def fresh(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tenant project, nothing evaluated yet, its first date not set (so: today)."""
    monkeypatch.delenv(START_DATE_ENV)  # restored after the test, whatever the command set
    return workdir


def test_a_past_date_lowers_the_first_date_for_the_command(
    fresh: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", *DATA, "--date", today_utc(), "--dry-run"]) == 0
    assert START_DATE_ENV not in os.environ  # today is a partition already: nothing to lower
    assert main(["run", *DATA, "--date", _days_ago(3), "--dry-run"]) == 0
    assert os.environ[START_DATE_ENV] == _days_ago(3)  # what the definitions, imported next, read
    assert main(["run", *DATA, "--date", _days_ago(1), "--dry-run"]) == 0
    assert os.environ[START_DATE_ENV] == _days_ago(3)  # never raised again
    assert not (fresh / "results").exists()
    capsys.readouterr()


@pytest.mark.parametrize(
    ("setting", "argv", "message"),
    [
        (None, ["run", *DATA, "--date", "2999-01-01"], "--date: must be between"),
        (None, ["run", *DATA, "--date", _days_ago(MAX_DAYS_BACK + 1)], f"and today ({today_utc()}), UTC"),
        (None, ["backfill", "--from", _days_ago(MAX_DAYS_BACK + 1)], "--from: must be between"),
        ("2026-13-01", ["run", *DATA], f"{START_DATE_ENV}: '2026-13-01' is not YYYY-MM-DD"),
        (
            "2999-01-01",
            ["run", *DATA, "--date", _days_ago(1)],
            f"{START_DATE_ENV}: 2999-01-01 is after today",
        ),
    ],
)
def test_a_date_out_of_range_or_a_wrong_setting_is_one_line_and_exit_2(
    fresh: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    setting: str | None,
    argv: list[str],
    message: str,
) -> None:
    if setting is not None:
        monkeypatch.setenv(START_DATE_ENV, setting)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and "Traceback" not in err[0], err
    assert not (fresh / "results").exists() and not (fresh / "dagster_home").exists()


def test_a_running_daemon_cannot_backfill_before_its_first_date(
    fresh: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EVAL_PIPELINE_KB", str(fresh / "tenant/kb.yaml"))
    monkeypatch.setenv("EVAL_PIPELINE_BANKS_DIR", str(fresh / "tenant/banks"))
    with project_instance(fresh / "dagster_home") as instance:  # as `dg dev`'s daemon beats
        instance.add_daemon_heartbeat(DaemonHeartbeat(time.time(), "BACKFILL", "dg-dev", errors=[]))
        assert main(["backfill", "--from", _days_ago(2), "--model", "local-minilm"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1, err
        assert err[0].endswith(
            f"--from {_days_ago(2)}: before the first date {today_utc()} of the running daemon (`dg dev`); "
            f"stop it so that this command starts its own, or restart it with {START_DATE_ENV}={_days_ago(2)}"
        )
        assert instance.get_backfills() == []

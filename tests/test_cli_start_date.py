"""The dates `run` and `backfill` take: from `MAX_DAYS_BACK` days before today to today (UTC), in
every process and project alike, nothing to set; a date out of range is one line and exit 2. In
process and without an evaluation (`run --dry-run` stops before any)."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest

from eval_pipeline.cli import main
from eval_pipeline.core.dates import MAX_DAYS_BACK, today_utc

DATA = ["--kb", "tenant/kb.yaml", "--banks-dir", "tenant/banks", "--model", "local-minilm"]


def _days_ago(n: int) -> str:
    return (date.fromisoformat(today_utc()) - timedelta(days=n)).isoformat()


def test_a_past_date_within_the_window_is_taken(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for day in (today_utc(), _days_ago(12), _days_ago(MAX_DAYS_BACK)):
        assert main(["run", *DATA, "--date", day, "--dry-run"]) == 0
    assert not (workdir / "results").exists()
    capsys.readouterr()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", *DATA, "--date", "2999-01-01"], "--date: must be between"),
        (["run", *DATA, "--date", "2026-13-01"], "--date: '2026-13-01' is not YYYY-MM-DD"),
        (["run", *DATA, "--date", _days_ago(MAX_DAYS_BACK + 1)], f"and today ({today_utc()}), UTC"),
        (["backfill", "--from", _days_ago(MAX_DAYS_BACK + 1)], "--from: must be between"),
    ],
)
def test_a_date_out_of_range_is_one_line_and_exit_2(
    workdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and "Traceback" not in err[0], err
    assert not (workdir / "results").exists() and not (workdir / "dagster_home").exists()

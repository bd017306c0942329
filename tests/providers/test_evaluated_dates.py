"""The first date a project evaluated, from its results location's folder names (a local folder
or an object store), and the first date of the partitions derived from it."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest
from upath import UPath

from eval_pipeline.core.dates import today_utc
from eval_pipeline.location import START_DATE_ENV, start_date
from eval_pipeline.providers.evaluated_dates import first_evaluated_date


def _days_ago(n: int) -> str:
    return (date.fromisoformat(today_utc()) - timedelta(days=n)).isoformat()


def _evaluated(root: UPath, *folders: str) -> None:
    for folder in folders:
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / "results.json").write_text("{}")


@pytest.mark.parametrize("store", ["local", "memory"])
def test_the_first_date_is_the_earliest_model_date_folder(tmp_path: Path, store: str) -> None:
    root = UPath(tmp_path / "results") if store == "local" else UPath(f"memory://{tmp_path.name}/results")
    assert first_evaluated_date(root) is None  # nothing evaluated: no folder at all
    root.mkdir(parents=True)
    assert first_evaluated_date(root) is None
    # Narrowed runs and comparisons (`_…`) are no model's evaluation; other names are no dates.
    _evaluated(root, "_comparison/2026-01-02", "_scoped/2026-01-01")
    _evaluated(root, "m1/2026-13-01", "m1/20260103", "m1/notes")
    assert first_evaluated_date(root) is None
    _evaluated(root, "m1/2026-11-20", "m1/2026-11-21", "m2/2026-11-19")
    assert first_evaluated_date(root) == "2026-11-19"


def test_the_partitions_start_at_the_first_evaluation_else_today(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(START_DATE_ENV)
    monkeypatch.setenv("EVAL_PIPELINE_RESULTS_DIR", str(tmp_path / "results"))
    assert start_date() == today_utc()
    _evaluated(UPath(tmp_path / "results"), "m1/2999-01-01")  # a clock set wrong: never past today
    assert start_date() == today_utc()
    _evaluated(UPath(tmp_path / "results"), f"m1/{_days_ago(5)}", f"m2/{_days_ago(2)}")
    assert start_date() == _days_ago(5)
    # The object store the code location sends reports to, when set, is where it looks.
    monkeypatch.setenv("EVAL_PIPELINE_RESULTS_URI", f"memory://{tmp_path.name}/reports")
    _evaluated(UPath(f"memory://{tmp_path.name}/reports"), f"m1/{_days_ago(9)}")
    assert start_date() == _days_ago(9)
    # The setting wins over what was evaluated, either way.
    monkeypatch.setenv(START_DATE_ENV, _days_ago(1))
    assert start_date() == _days_ago(1)
    monkeypatch.setenv(START_DATE_ENV, _days_ago(30))
    assert start_date() == _days_ago(30)

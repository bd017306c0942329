"""One scheduled tick end to end, as a deployment runs it: the real `dagster-daemon` (its scheduler
and backfill daemons) on the project's instance ticks `comparison_backfill` (a cron of every
minute, a window of 2 dates, from the project's schedules.yaml), the tick's job submits the
backfill, and the backfill leaves a model comparison for every date of the window. Waits are
bounded; nothing is timed."""

from __future__ import annotations

import os
import shutil
import time
from datetime import date, timedelta
from pathlib import Path

import dagster as dg
import pytest
import yaml

from eval_pipeline.core.dates import today_utc
from eval_pipeline.core.scoring.run_document import COMPARISON_DIR, COMPARISON_FILE
from eval_pipeline.orchestration.backfill import ENDED
from eval_pipeline.orchestration.execution import project_instance
from eval_pipeline.orchestration.schedules import SCHEDULE_TAG
from eval_pipeline.runtime.dagster_private import BulkActionStatus
from tests.conftest import TENANT
from tests.defs.conftest import REPO, location_env
from tests.embedding_cache import warm
from tests.process_groups import dagster_daemon

DAEMON_SITE = REPO / "tests" / "daemon_site"
MODEL = "local-minilm"
SCHEDULES = f"""daily:
  enabled: false
comparison_backfill:
  cron: '* * * * *'
  window_days: 2
  models: [{MODEL}]
"""


@pytest.mark.timeout(1500)
def test_a_scheduled_tick_leaves_a_comparison_for_every_date_of_its_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local_embeddings: Path
) -> None:
    shutil.copytree(TENANT, tmp_path / "tenant")
    # One model: the daemon's automation evaluates today meanwhile, of every enabled model.
    models = yaml.safe_load((REPO / "models.yaml").read_text())
    models["models"] = {MODEL: models["models"][MODEL]}
    (tmp_path / "models.yaml").write_text(yaml.safe_dump(models))
    (tmp_path / "schedules.yaml").write_text(SCHEDULES)
    warm(tmp_path / ".cache", local_embeddings)
    for name, value in location_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    # The daemon's backfill loop waits 5 s between iterations, not Dagster's 30 (tests/daemon_site).
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(DAEMON_SITE), os.environ.get("PYTHONPATH")]))
    )
    monkeypatch.setenv("EVAL_PIPELINE_TEST_DAEMON_INTERVAL_S", "5")
    monkeypatch.chdir(tmp_path)
    today = date.fromisoformat(today_utc())
    window = [(today - timedelta(days=n)).isoformat() for n in (2, 1)]

    with (
        project_instance(tmp_path / "dagster_home") as instance,
        dagster_daemon(instance.root_directory, tmp_path / "daemon.log"),
    ):
        deadline = time.monotonic() + 1380
        backfill = None
        while time.monotonic() < deadline:
            found = [b for b in instance.get_backfills() if b.tags.get(SCHEDULE_TAG) == "comparison_backfill"]
            # Ticks while it runs wait for it: one backfill, however often the cron fired.
            assert len(found) <= 1, [b.backfill_id for b in found]
            backfill = found[0] if found else None
            if backfill is not None and backfill.status in ENDED:
                break
            time.sleep(2)
        assert backfill is not None, "no tick launched a backfill"
        assert backfill.status is BulkActionStatus.COMPLETED_SUCCESS, backfill.status
        # The tick's own run submitted it (the backfill's runs carry the schedule's tag too).
        ticks = [
            r for r in instance.get_runs() if r.tags.get("dagster/schedule_name") == "comparison_backfill"
        ]
        assert ticks and {r.job_name for r in ticks} == {"launch_evaluation_backfill"}
        compared = {
            r.partition_key
            for r in instance.fetch_materializations(dg.AssetKey("model_comparison"), limit=100).records
        }
    assert set(window) <= compared
    for day in window:
        assert (tmp_path / "results" / COMPARISON_DIR / day / COMPARISON_FILE).is_file()

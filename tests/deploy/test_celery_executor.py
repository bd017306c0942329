"""Evaluations on Dagster's Celery executor, really distributed: a Redis broker (Debian's
`redis-server`, which .ci/run installs), two `celery` worker processes, the Postgres instance of
deploy/dagster.yaml and the S3 object store, all started and stopped here.

`eval-pipeline backfill` of 3 dates x 2 models (an offline one, and an API one whose SDKs call the
emulator), carried out by the command with the code location's executor set to Celery
(`EVAL_PIPELINE_CELERY_BROKER`), stores the results documents an in-process `run` of the same
dates stores (the numeric contract: the same inputs give the same documents, when and how long
aside); its steps ran on both workers, and the API model's steps took the provider pool's one
slot in turn across them: the emulator never saw more than one model's allowance.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml
from upath import UPath

from eval_pipeline.core.scoring.run_document import RESULTS_FILE
from eval_pipeline.defs.executor import CELERY_BROKER_ENV
from eval_pipeline.testing.emulator.server import EmulatorHandle, start_emulator
from eval_pipeline.testing.postgres import new_database
from tests.conftest import TENANT
from tests.embedding_cache import warm
from tests.process_groups import group_alive
from tests.stable_json import differences, stable

REPO = Path(__file__).resolve().parents[2]
REDIS = shutil.which("redis-server")
DATES = ["2026-11-20", "2026-11-21", "2026-11-22"]
API_MODEL, LOCAL_MODEL = "pooled-haiku", "local-minilm"
RATE = 600  # reranks per minute: the limiter's bucket holds RATE / 60 = 10
RERANK = "POST /v1/messages"
WORKERS = ("first", "second")
CELERY = [sys.executable, "-m", "celery", "-A", "dagster_celery.app"]
# One task at a time in the worker's own process; no chatter between workers at start.
WORKER = [
    "worker",
    "-Q",
    "dagster",
    "--pool",
    "solo",
    "--without-gossip",
    "--without-mingle",
    "-l",
    "WARNING",
]
pytestmark = pytest.mark.skipif(
    REDIS is None, reason="no redis-server (Debian's redis-server; .ci/run installs it)"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process group, SIGKILL to whatever of it is left after 30 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    finally:
        if group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[str]:
    """A Redis server of its own on a free loopback port, nothing persisted."""
    assert REDIS is not None
    port = _free_port()
    command = [REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    proc = subprocess.Popen(
        [*command, "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.1)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        _stop(proc)


def _models_file(path: Path) -> None:
    models = yaml.safe_load((REPO / "models.yaml").read_text())["models"]
    api = {
        "embedder": {"kind": "voyage", "model_id": "voyage-3.5"},
        "reranker": {"kind": "claude", "model_id": "claude-haiku-4-5"},
        "rate_limit_per_min": RATE,
        "concurrency": 4,
        "trials": 3,  # 8 semantic tests x 3 trials: 24 reranks a run, past one bucket
    }
    doc = {"schema_version": 1, "models": {LOCAL_MODEL: models[LOCAL_MODEL], API_MODEL: api}}
    path.write_text(yaml.safe_dump(doc))


def _project_env(root: Path, emulator: EmulatorHandle, **paths: str) -> dict[str, str]:
    """The environment a user's deployment gives every process: the project's paths, the API
    keys and base URLs (the emulator's), loopback without a proxy."""
    env = {
        **os.environ,
        "EVAL_PIPELINE_KB": str(root / "tenant" / "kb.yaml"),
        "EVAL_PIPELINE_BANKS_DIR": str(root / "tenant" / "banks"),
        "EVAL_PIPELINE_MODELS_FILE": str(root / "models.yaml"),
        "EVAL_PIPELINE_CALIBRATION_DIR": str(root / "calibration"),
        "ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key",
        "VOYAGE_API_KEY": "pa-test-not-a-real-key",
        "ANTHROPIC_BASE_URL": emulator.base_url,
        "VOYAGE_BASE_URL": emulator.voyage_base_url,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
    env.update({f"EVAL_PIPELINE_{name.upper()}": value for name, value in paths.items()})
    return env


def _cli(env: dict[str, str], cwd: Path, *argv: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "eval_pipeline.cli", *argv], cwd=cwd, env=env, capture_output=True, text=True
    )
    assert done.returncode in (0, 1), f"eval-pipeline {' '.join(argv)}: {done.stderr[-3000:]}"


def _documents(results: UPath | Path) -> dict[str, Any]:
    return {
        f"{model}/{date}": stable(json.loads((results / model / date / RESULTS_FILE).read_text()))
        for model in (LOCAL_MODEL, API_MODEL)
        for date in DATES
    }


@pytest.mark.timeout(1800)
def test_a_backfill_on_celery_workers_stores_what_an_in_process_run_stores(
    broker: str,
    postgres: str,
    s3: str,
    tmp_path: Path,
    local_embeddings: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shutil.copytree(TENANT, tmp_path / "tenant")
    _models_file(tmp_path / "models.yaml")
    for side in ("local", "celery"):
        warm(tmp_path / side / "cache", local_embeddings)
    home = tmp_path / "celery" / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "deploy" / "dagster.yaml", home / "dagster.yaml")
    with start_emulator() as emulator:
        # The reference: `run` of each date, in process, on its own SQLite home and local folders.
        local = tmp_path / "local"
        local_env = _project_env(
            tmp_path,
            emulator,
            results_dir=str(local / "results"),
            storage_dir=str(local / "storage"),
            cache_dir=str(local / "cache"),
        )
        local_env["DAGSTER_HOME"] = str(local / "dagster_home")
        inputs = [
            *("--kb", local_env["EVAL_PIPELINE_KB"], "--banks-dir", local_env["EVAL_PIPELINE_BANKS_DIR"]),
            *("--models-file", local_env["EVAL_PIPELINE_MODELS_FILE"]),
        ]
        for date in DATES:
            _cli(
                local_env, local, "run", "--date", date, *inputs, "--model", LOCAL_MODEL, "--model", API_MODEL
            )
        in_process_calls = emulator.stats["requests"][RERANK]
        emulator.reset()

        # The same on Celery: results and step values in the bucket, runs in Postgres.
        celery = tmp_path / "celery"
        env = _project_env(
            tmp_path,
            emulator,
            results_uri=f"{s3}/celery/results",
            outputs_uri=f"{s3}/celery/outputs",
            storage_dir=str(celery / "storage"),
            cache_dir=str(celery / "cache"),
        )
        env |= {
            "DAGSTER_HOME": str(home),
            "DAGSTER_POSTGRES_URL": new_database(postgres, "celery_backfill"),
            CELERY_BROKER_ENV: broker,
        }
        workers = [
            subprocess.Popen(
                [*CELERY, "-b", broker, "--result-backend", broker, *WORKER, "-n", f"{name}@%h"],
                cwd=celery,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            for name in WORKERS
        ]
        try:
            _cli(env, celery, "backfill", "--from", DATES[0], "--to", DATES[-1])
        finally:
            for worker in workers:
                _stop(worker)

        on_celery, in_process = _documents(UPath(f"{s3}/celery/results")), _documents(local / "results")
        assert on_celery == in_process, differences(on_celery, in_process)[:10]
        # Every API call the in-process runs made, made again (the response cache is per side).
        assert emulator.stats["requests"][RERANK] == in_process_calls > 0
        # The provider saw one model's allowance at most: its bucket plus a second's share of the
        # rate in any second (two more: arrival jitter at either edge).
        assert emulator.counts.peak(RERANK, window_s=1.0) <= RATE // 60 + RATE // 60 + 2

    monkeypatch.setenv("DAGSTER_POSTGRES_URL", env["DAGSTER_POSTGRES_URL"])
    with dg.DagsterInstance.from_config(str(home)) as instance:
        # The backfill's runs.
        runs = [r for r in instance.get_runs() if "dagster/backfill" in r.tags]
        assert runs and {r.status for r in runs} == {dg.DagsterRunStatus.SUCCESS}
        hosts = {
            str(entry.dagster_event.engine_event_data.metadata["Celery worker"].value).split("@")[0]
            for run in runs
            for entry in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ENGINE_EVENT)
            if entry.dagster_event is not None
            and "Celery worker" in entry.dagster_event.engine_event_data.metadata
        }
        assert hosts == set(WORKERS)
        assert instance.event_log_storage.get_concurrency_info("anthropic").active_slot_count == 0

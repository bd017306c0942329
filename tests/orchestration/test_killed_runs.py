"""No run outlives its process, on real processes: a `run` of an API model (the emulator, a
pool limit of 1) killed with SIGKILL, then the same command again (the killed backfill and two
runs at once are in test_daemon_and_fresh_instance.py).

The kill points are observed, not timed: the test polls the instance (a run STARTED, a pool slot
claimed) and the emulator (reranks received) and kills the command as soon as it sees its point.
Bounded waits fail the test; nothing asserts how long anything took.

The first point's killed run is a fresh `eval-pipeline` process, as a user starts it; the other
points' are forked from the process that runs the reruns (cli_rounds.py), which has imported
Dagster and the project by then: a process of their own all the same, killed with SIGKILL at the
same observed points, without ~2 s of CPU for the imports each.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import dagster as dg
import pytest
import yaml

from eval_pipeline.core.scoring.run_document import RESULTS_FILE
from eval_pipeline.defs.automation import model_job
from eval_pipeline.orchestration.execution import instance_lock
from eval_pipeline.runtime.run_monitor import UNFINISHED
from eval_pipeline.testing.emulator.server import EmulatorHandle, start_emulator
from eval_pipeline.testing.postgres import new_database
from tests.deploy.conftest import postgres  # noqa: F401  (the embedded server, per module)
from tests.orchestration.cli_rounds import Ended, Rounds

REPO = Path(__file__).resolve().parents[2]
DATE = "2026-11-20"
MODEL = "killed-haiku"
RERANK = "POST /v1/messages"
# 8 semantic tests x 2 trials = 16 reranks at 4/s after a bucket of 4: a few seconds of calls.
MODELS = {
    MODEL: {
        "embedder": {"kind": "local"},
        "reranker": {"kind": "claude", "model_id": "claude-haiku-4-5"},
        "rate_limit_per_min": 240,
        "trials": 2,
    }
}
CLI = [sys.executable, "-m", "eval_pipeline.cli"]
TIMEOUT_S = 240  # a run that waits for a slot forever fails the test here


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The project's SQLite storage reads its base_dir from DAGSTER_HOME: the test reads the same.
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))


@pytest.fixture
def emulator() -> Iterator[EmulatorHandle]:
    with start_emulator() as handle:
        yield handle


def _project(tenant: Path, root: Path, emulator: EmulatorHandle) -> dict[str, str]:
    (root / "models.yaml").write_text(yaml.safe_dump({"schema_version": 1, "models": MODELS}))
    env = {
        **os.environ,
        "DAGSTER_HOME": str(root / "dagster_home"),
        "ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key",
        "ANTHROPIC_BASE_URL": emulator.base_url,
        "EVAL_PIPELINE_KB": str(tenant / "kb.yaml"),
        "EVAL_PIPELINE_BANKS_DIR": str(tenant / "banks"),
    }
    env.pop("VOYAGE_API_KEY", None)
    return env


def _argv(env: dict[str, str]) -> list[str]:
    argv = ["run", "--date", DATE, "--model", MODEL]
    argv += ["--kb", env["EVAL_PIPELINE_KB"], "--banks-dir", env["EVAL_PIPELINE_BANKS_DIR"]]
    return [*argv, "--cache", "off"]


class Running(Protocol):
    """The killed run's process: a fresh one (`subprocess.Popen`) or a forked one (`Forked`)."""

    def poll(self) -> int | None: ...
    def kill(self) -> None: ...
    def wait(self) -> int: ...


# The killed run, started: (folder, environment) -> its process.
Start = Callable[[Path, dict[str, str]], Running]
# The rerun: (folder, environment) -> how it ended.
Rerun = Callable[[Path, dict[str, str]], Ended]


def _fresh_run(root: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    out = subprocess.DEVNULL
    return subprocess.Popen([*CLI, *_argv(env)], cwd=root, env=env, text=True, stdout=out, stderr=out)


def _model_run_started(instance: dg.DagsterInstance, _: EmulatorHandle) -> bool:
    runs = instance.get_runs(dg.RunsFilter(job_name=model_job.name, statuses=[dg.DagsterRunStatus.STARTED]))
    return bool(runs)


def _slot_claimed(instance: dg.DagsterInstance, _: EmulatorHandle) -> bool:
    storage = instance.event_log_storage
    pools = storage.get_concurrency_keys()
    return any(storage.get_concurrency_info(pool).active_slot_count for pool in pools)


def _reranking(_: dg.DagsterInstance, emulator: EmulatorHandle) -> bool:
    return int(emulator.stats["requests"].get(RERANK, 0)) >= 6


POINTS: dict[str, Callable[[dg.DagsterInstance, EmulatorHandle], bool]] = {
    "run-started": _model_run_started,
    "slot-claimed": _slot_claimed,
    "mid-reranks": _reranking,
}


def _kill_at(point: str, process: Running, home: Path, emulator: EmulatorHandle) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not (home / "dagster.yaml").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    with instance_lock(home):  # the command may be creating its tables: the way it shares them
        instance = dg.DagsterInstance.from_config(str(home))
    with instance:
        while process.poll() is None and time.monotonic() < deadline:
            if POINTS[point](instance, emulator):
                process.kill()
                process.wait()
                return
            time.sleep(0.1)
    ended = process.poll()
    process.kill()
    process.wait()  # a forked run's end is read before the next command of its process
    pytest.fail(f"the run ended (exit {ended}) before the kill point '{point}'")


def _killed_then_rerun(
    root: Path, env: dict[str, str], point: str, emulator: EmulatorHandle, start: Start, rerun: Rerun
) -> None:
    home = Path(env["DAGSTER_HOME"])
    _kill_at(point, start(root, env), home, emulator)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        (killed,) = instance.get_runs(dg.RunsFilter(job_name=model_job.name))
        assert killed.status in UNFINISHED  # what nothing monitored left behind
    code, out, err = rerun(root, env)
    assert code in (0, 1), out + err
    assert f"run {killed.run_id[:8]} ({model_job.name}" in out and "is gone" in out, out
    assert (root / "results" / MODEL / DATE / RESULTS_FILE).is_file()
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert instance.get_runs(dg.RunsFilter(statuses=UNFINISHED)) == []
        ended = instance.get_run_by_id(killed.run_id)
        assert ended is not None and ended.status is dg.DagsterRunStatus.FAILURE
        storage = instance.event_log_storage
        for pool in storage.get_concurrency_keys():
            info = storage.get_concurrency_info(pool)
            assert (pool, info.active_slot_count, info.pending_step_count) == (pool, 0, 0)


@pytest.fixture(scope="module")
def rounds() -> Iterator[Rounds]:
    """One process for the reruns, one after another, and the forked killed runs (cli_rounds.py):
    each rerun is a process other than the killed one, all a rerun needs to find it gone; the
    first pays a fresh command's imports, the others do without."""
    rounds = Rounds(dict(os.environ))
    try:
        yield rounds
    finally:
        rounds.stop()


def _forked_run(rounds: Rounds) -> Start:
    return lambda root, env: rounds.fork(root, env, _argv(env))


def _rerun(rounds: Rounds) -> Rerun:
    return lambda root, env: rounds.run(root, env, _argv(env), TIMEOUT_S)


FRESH_POINT = next(iter(POINTS))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("point", list(POINTS))
def test_a_killed_run_ends_failed_frees_its_slot_and_the_rerun_completes(
    point: str, tenant: Path, tmp_path: Path, emulator: EmulatorHandle, rounds: Rounds
) -> None:
    start = _fresh_run if point == FRESH_POINT else _forked_run(rounds)
    _killed_then_rerun(tmp_path, _project(tenant, tmp_path, emulator), point, emulator, start, _rerun(rounds))


@pytest.mark.timeout(600)
def test_the_same_on_postgres(
    postgres: str,  # noqa: F811
    tenant: Path,
    tmp_path: Path,
    emulator: EmulatorHandle,
    monkeypatch: pytest.MonkeyPatch,
    rounds: Rounds,
) -> None:
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", new_database(postgres, "killed_runs"))
    env = _project(tenant, tmp_path, emulator)
    home = Path(env["DAGSTER_HOME"])
    home.mkdir()
    shutil.copy(REPO / "deploy" / "dagster.yaml", home / "dagster.yaml")
    _killed_then_rerun(tmp_path, env, "slot-claimed", emulator, _forked_run(rounds), _rerun(rounds))

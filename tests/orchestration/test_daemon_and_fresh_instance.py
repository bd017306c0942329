"""Commands that share an instance, on real processes: `backfill` run again after a kill at any of
several moments completes (the killed command's backfill and runs are ended with a reason), and
two `run`s started at once in a fresh checkout both complete (the instance is created under a
lock). Bounded waits fail a test; nothing asserts how long anything took."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.core.scoring.run_document import RESULTS_FILE
from eval_pipeline.orchestration.backfill import BACKFILL_TAG
from eval_pipeline.runtime.run_monitor import UNFINISHED
from tests.orchestration.cli_rounds import Rounds

REPO = Path(__file__).resolve().parents[2]
DATE = "2026-11-20"
TIMEOUT_S = 240


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))


def _backfill_command(tenant: Path, project: Path) -> tuple[list[str], dict[str, str]]:
    """`backfill` of one date and model on a copy of the tenant project, and its environment."""
    shutil.copy(REPO / "models.yaml", project / "models.yaml")
    env = {
        **os.environ,
        "EVAL_PIPELINE_KB": str(tenant / "kb.yaml"),
        "EVAL_PIPELINE_BANKS_DIR": str(tenant / "banks"),
    }
    command = [sys.executable, "-m", "eval_pipeline.cli", "backfill", "--from", DATE]
    return [*command, "--model", "local-minilm"], env


def _queued_or_unfinished() -> list[str]:
    statuses = [dg.DagsterRunStatus.QUEUED, *UNFINISHED]
    with dg.DagsterInstance.get() as instance:
        return [f"{r.run_id[:8]} {r.status}" for r in instance.get_runs(dg.RunsFilter(statuses=statuses))]


# Where the command is killed: the backfill just submitted; and part of it done, its next runs
# queued or running in the command.
MOMENTS = ("submitted", "partly done")


@pytest.mark.timeout(900)
def test_a_backfill_killed_at_any_moment_then_run_again_completes(tenant: Path, tmp_path: Path) -> None:
    command, env = _backfill_command(tenant, tmp_path)
    for key in ("ANTHROPIC_API_KEY", "VOYAGE_API_KEY"):
        env.pop(key, None)
    command += ["--timeout", "10"]
    for moment in MOMENTS:
        backfill = subprocess.Popen(command, cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE)
        try:
            assert backfill.stdout is not None
            for line in backfill.stdout:
                if line.startswith("eval-pipeline: backfill") and moment == "submitted":
                    break
                if re.match(r"\s*[1-9]\d*/\d+ done", line):
                    break
            else:
                raise AssertionError(f"the backfill ended before it could be killed {moment}")
        finally:
            backfill.kill()
            backfill.wait()

    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=800)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert "backfill completed_success" in done.stdout
    assert (tmp_path / "results" / "local-minilm" / DATE / RESULTS_FILE).is_file()
    # Each command canceled the backfill of the one killed before it, naming the reason.
    assert done.stdout.count("is gone; canceled by eval-pipeline") == 1, done.stdout
    with dg.DagsterInstance.get() as instance:
        ours = [b for b in instance.get_backfills() if BACKFILL_TAG in b.tags]
        statuses = sorted(b.status.value for b in ours)
    # The last one completed; each killed one ended: canceled by the next command, or failed
    # where its own runs were ended as orphans first (a kill once part of it is done).
    assert statuses.count("COMPLETED_SUCCESS") == 1 and len(statuses) == len(MOMENTS) + 1, statuses
    assert set(statuses) - {"COMPLETED_SUCCESS"} <= {"CANCELED", "FAILED"}, statuses
    assert _queued_or_unfinished() == []


@pytest.fixture(scope="module")
def racers() -> Iterator[list[Rounds]]:
    """Two processes that race each attempt: started at once, their first commands are the
    fresh processes' of a CI matrix (importing Dagster and the project as they go); each later
    attempt releases both at once again, already imported, so their starts lie even closer."""
    pair = [Rounds(dict(os.environ)), Rounds(dict(os.environ))]
    try:
        yield pair
    finally:
        for racer in pair:
            racer.stop()


# Five attempts: the race (both creating the instance) was seen to fail only now and then. Each
# attempt is a fresh checkout, its own instance to create. All on the tenant domain: the race is
# in the instance both runs share, not in the data.
@pytest.mark.timeout(600)
@pytest.mark.parametrize("attempt", range(5))
def test_two_runs_started_at_once_in_a_fresh_checkout_both_complete(
    attempt: int, tenant: Path, tmp_path: Path, racers: list[Rounds]
) -> None:
    shutil.copy(REPO / "models.yaml", tmp_path / "models.yaml")
    inputs = ["--kb", str(tenant / "kb.yaml"), "--banks-dir", str(tenant / "banks")]
    models = ["local-minilm", "local-hybrid"]
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "VOYAGE_API_KEY")}
    for racer, model in zip(racers, models, strict=True):
        racer.start(tmp_path, env, ["run", "--date", DATE, "--model", model, *inputs])
    results = [racer.result(TIMEOUT_S) for racer in racers]
    assert [r.code in (0, 1) for r in results] == [True, True], results
    for model in models:
        assert (tmp_path / "results" / model / DATE / RESULTS_FILE).is_file()

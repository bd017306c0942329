"""Processes a command starts and shares, on real processes: a killed `backfill` leaves no daemon
(nor anything the daemon started), and two `run`s started at once in a fresh checkout both
complete (the instance is created under a lock). Bounded waits fail a test; nothing asserts how
long anything took."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eval_pipeline.core.scoring.run_document import RESULTS_FILE
from eval_pipeline.orchestration.child_process import group_alive

REPO = Path(__file__).resolve().parents[2]
DATE = "2026-11-20"
CLI_RUN = [sys.executable, "-m", "eval_pipeline.cli", "run", "--date", DATE]
TIMEOUT_S = 240


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.timeout(300)
def test_a_killed_backfill_leaves_no_daemon(tenant: Path, tmp_path: Path) -> None:
    shutil.copy(REPO / "models.yaml", tmp_path / "models.yaml")
    env = {
        **os.environ,
        "EVAL_PIPELINE_KB": str(tenant / "kb.yaml"),
        "EVAL_PIPELINE_BANKS_DIR": str(tenant / "banks"),
    }
    command = [sys.executable, "-m", "eval_pipeline.cli", "backfill", "--from", DATE]
    command += ["--model", "local-minilm"]
    backfill = subprocess.Popen(command, cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE)
    daemons: list[int] = []
    try:
        assert backfill.stdout is not None
        for line in backfill.stdout:
            if "started a Dagster daemon" in line:
                daemons = _children(backfill.pid)
                break
        assert daemons, "the backfill started no daemon"
        backfill.kill()
        backfill.wait()
        deadline = time.monotonic() + 120
        while any(group_alive(d) for d in daemons) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not any(group_alive(d) for d in daemons), "the daemon (or a process it started) outlived it"
    finally:
        backfill.kill()
        for pgid in daemons:
            if group_alive(pgid):
                os.killpg(pgid, signal.SIGKILL)


# Five attempts: the race (both creating the instance) was seen to fail only now and then. All on
# the tenant domain: the race is in the instance both runs share, not in the data, and an attempt
# on the sample cost over twice the CPU of one on the tenant (both processes embed its 147 tests cold).
@pytest.mark.timeout(600)
@pytest.mark.parametrize("attempt", range(5))
def test_two_runs_started_at_once_in_a_fresh_checkout_both_complete(
    attempt: int, tenant: Path, tmp_path: Path
) -> None:
    shutil.copy(REPO / "models.yaml", tmp_path / "models.yaml")
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "VOYAGE_API_KEY")}
    inputs = ["--kb", str(tenant / "kb.yaml"), "--banks-dir", str(tenant / "banks")]
    models = ["local-minilm", "local-hybrid"]
    runs = [
        subprocess.Popen(
            [*CLI_RUN, "--model", model, *inputs],
            cwd=tmp_path,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for model in models
    ]
    outputs = [run.communicate(timeout=TIMEOUT_S)[0] for run in runs]
    assert [run.returncode in (0, 1) for run in runs] == [True, True], outputs
    for model in models:
        assert (tmp_path / "results" / model / DATE / RESULTS_FILE).is_file()

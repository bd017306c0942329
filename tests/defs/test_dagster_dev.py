"""Smoke test of the UI: `dg dev` (what `make ui` runs) loads the code location from the `dg`
project and lists the assets over GraphQL, and stops on SIGTERM; the project's paths point at
temporary copies."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from eval_pipeline.orchestration.child_process import group_alive

REPO = Path(__file__).resolve().parents[2]
QUERY = json.dumps({"query": "{ assetNodes { assetKey { path } } }"}).encode()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _asset_names(port: int) -> set[str]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql", data=QUERY, headers={"Content-Type": "application/json"}
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy
    with opener.open(request, timeout=5) as response:
        nodes = json.load(response)["data"]["assetNodes"]
    return {"/".join(n["assetKey"]["path"]) for n in nodes}


@pytest.mark.timeout(240)
def test_dagster_dev_lists_assets_over_graphql(tmp_path: Path) -> None:
    for name in ("kb", "test_banks"):
        shutil.copytree(REPO / name, tmp_path / name)
    shutil.copy(REPO / "models.yaml", tmp_path / "models.yaml")
    paths = {
        "EVAL_PIPELINE_KB": "kb",
        "EVAL_PIPELINE_BANKS_DIR": "test_banks",
        "EVAL_PIPELINE_MODELS_FILE": "models.yaml",
        "EVAL_PIPELINE_RESULTS_DIR": "results",
        "EVAL_PIPELINE_STORAGE_DIR": "storage",
        "EVAL_PIPELINE_CACHE_DIR": ".cache",
        "EVAL_PIPELINE_CALIBRATION_DIR": "calibration",
    }
    env = {**os.environ, **{k: str(tmp_path / v) for k, v in paths.items()}}
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    port = _free_port()
    # What `make ui` runs, started as a script in the background starts it: SIGINT ignored.
    proc = subprocess.Popen(
        [sys.executable, "-m", "eval_pipeline.orchestration.dev_server", "-h", "127.0.0.1", "-p", str(port)],
        cwd=REPO,  # the dg project
        env={**env, "DAGSTER_HOME": str(home), "VIRTUAL_ENV": str(Path(sys.executable).parents[1])},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: whatever outlives it is found and stopped
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        names: set[str] = set()
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                names = _asset_names(port)
            except (OSError, KeyError, TypeError, ValueError):
                names = set()
            if names:
                break
            # Not up yet, or its code location still loading (no assets yet): a refused
            # connection answers at once, so asking again soon costs little and ends the wait sooner.
            time.sleep(0.2)
        assert {"knowledge_base", "semantic_retrievals", "scored_aggregate", "run_report"} <= names
        proc.send_signal(signal.SIGTERM)  # to it alone: it stops its webserver and daemon itself
        proc.wait(timeout=60)
        deadline = time.monotonic() + 30
        while group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not group_alive(proc.pid), "a process `dg dev` started outlived it"
    finally:
        if group_alive(proc.pid):  # the test failed: stop whatever is left
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

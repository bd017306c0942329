"""The UI as a user starts it: `make ui` (`dg dev` on the project's instance settings) on a fresh
Dagster home writes the project's dagster.yaml before anything runs, loads the code location,
launches runs the way a GraphQL client does (a multi-partition key in the standard
`dagster/partition` tag alone), records each check with its partition, and stops on SIGTERM.
The project's paths point at temporary copies of the tenant fixture."""

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
from typing import Any

import pytest

from eval_pipeline.defs.partitions import model_date_key
from eval_pipeline.orchestration.execution import dagster_yaml
from tests.conftest import TENANT
from tests.defs.conftest import location_env
from tests.embedding_cache import warm
from tests.process_groups import group_alive

REPO = Path(__file__).resolve().parents[2]
DATE, MODEL = "2026-11-20", "local-minilm"
LOCATION = {"repositoryLocationName": "eval_pipeline", "repositoryName": "__repository__"}
LAUNCH = """mutation($params: ExecutionParams!) { launchRun(executionParams: $params) {
  __typename
  ... on LaunchRunSuccess { run { runId } }
  ... on PythonError { message }
  ... on RunConfigValidationInvalid { errors { message } }
} }"""
RUN = "query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"
MODELS_SHOWN = """{ assetNodes(assetKeys: [{path: ["run_report"]}]) {
  partitionKeysByDimension { name partitionKeys } } }"""
CHECKS = """query($partition: String) { assetCheckExecutions(assetKey: {path: ["release_gate"]},
  checkName: "no_critical_failures", partition: $partition, limit: 5) { status partition } }"""
SENSOR = """query($name: String!) { sensorOrError(sensorSelector: {repositoryLocationName:
  "eval_pipeline", repositoryName: "__repository__", sensorName: $name}) {
  ... on Sensor { jobOriginId sensorState { selectorId } } } }"""
STOP_SENSOR = """mutation($origin: String!, $selector: String!) {
  stopSensor(jobOriginId: $origin, jobSelectorId: $selector) { __typename } }"""
TICKS = """query($name: String!) { sensorOrError(sensorSelector: {repositoryLocationName:
  "eval_pipeline", repositoryName: "__repository__", sensorName: $name}) {
  ... on Sensor { sensorState { ticks(limit: 20) { status skipReason
    dynamicPartitionsRequestResults { partitionsDefName partitionKeys type } } } } } }"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _graphql(port: int, query: str, **variables: Any) -> Any:
    body = json.dumps({"query": query, "variables": variables}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql", data=body, headers={"Content-Type": "application/json"}
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy
    with opener.open(request, timeout=30) as response:
        answer = json.load(response)
    assert "errors" not in answer, answer["errors"]
    return answer["data"]


def _wait_for(what: str, seconds: float, probe: Any) -> Any:
    """`probe()` until it returns something truthy; a bounded wait fails the test naming `what`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            found = probe()
        except (OSError, KeyError, TypeError, ValueError):
            found = None
        if found:
            return found
        # A refused connection answers at once: asking again soon costs little.
        time.sleep(0.5)
    raise AssertionError(f"waited {seconds:.0f} s for {what}")


def _launch(port: int, job: str, partition: str) -> str:
    """Launch `job` as a GraphQL client does: the standard partition tag, no per-dimension tags."""
    params = {
        "selector": {**LOCATION, "jobName": job},
        "executionMetadata": {"tags": [{"key": "dagster/partition", "value": partition}]},
    }
    launched = _graphql(port, LAUNCH, params=params)["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    return str(launched["run"]["runId"])


def _finished(port: int, run_id: str) -> str | None:
    status = _graphql(port, RUN, id=run_id)["runOrError"]["status"]
    return str(status) if status in {"SUCCESS", "FAILURE", "CANCELED"} else None


def _models_shown(port: int) -> bool:
    dims = _graphql(port, MODELS_SHOWN)["assetNodes"][0]["partitionKeysByDimension"]
    return MODEL in {key for d in dims if d["name"] == "model" for key in d["partitionKeys"]}


def _adding_tick(port: int) -> dict[str, Any] | None:
    """The finished tick of `model_partitions` that added partitions, once the daemon wrote it."""
    ticks = _graphql(port, TICKS, name="model_partitions")["sensorOrError"]["sensorState"]["ticks"]
    added = [t for t in ticks if t["dynamicPartitionsRequestResults"] and t["status"] != "STARTED"]
    return added[0] if added else None


def _project_env(tmp_path: Path) -> dict[str, str]:
    """The environment pointing the code location at a copy of the tenant fixture in `tmp_path`."""
    shutil.copytree(TENANT, tmp_path / "tenant")
    shutil.copy(REPO / "models.yaml", tmp_path / "models.yaml")
    return {**os.environ, **location_env(tmp_path)}


def _stop_sensor(port: int, name: str) -> None:
    sensor = _graphql(port, SENSOR, name=name)["sensorOrError"]
    origin, selector = sensor["jobOriginId"], sensor["sensorState"]["selectorId"]
    _graphql(port, STOP_SENSOR, origin=origin, selector=selector)


@pytest.mark.timeout(420)
def test_make_ui_on_a_fresh_home_runs_with_the_projects_settings(
    tmp_path: Path, local_embeddings: Path
) -> None:
    env = _project_env(tmp_path)
    warm(tmp_path / ".cache", local_embeddings)
    home = tmp_path / "dagster_home"  # fresh: not even made
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
        _wait_for("the UI's GraphQL", 150, lambda: proc.poll() is None and _models_shown(port))
        # The settings were there before anything ran: the webserver and daemon read them at start.
        assert (home / "dagster.yaml").read_text() == dagster_yaml(home)
        # Only the launched runs, not today's automated evaluation, on a shared machine.
        _stop_sensor(port, "evaluation_automation")
        # The daemon's model_partitions tick added the models' partitions. Dagster records a
        # tick that launches no run as SKIPPED; its reason and its results say what it added.
        tick = _wait_for("the tick that added partitions", 60, lambda: _adding_tick(port))
        (added,) = tick["dynamicPartitionsRequestResults"]
        assert (added["partitionsDefName"], added["type"]) == ("model", "ADD_PARTITIONS")
        assert MODEL in added["partitionKeys"]
        assert tick["status"] == "SKIPPED"
        keys = ", ".join(added["partitionKeys"])
        assert tick["skipReason"] == f"added model partition(s) {keys}: evaluation_automation evaluates them"

        date_run = _launch(port, "evaluate_date", DATE)
        assert _wait_for("the date's run", 150, lambda: _finished(port, date_run)) == "SUCCESS"
        key = str(model_date_key(MODEL, DATE))
        model_run = _launch(port, "evaluate_model", key)
        assert _wait_for("the model's run", 150, lambda: _finished(port, model_run)) == "SUCCESS"
        assert (tmp_path / "results" / MODEL / DATE / "results.json").is_file()
        # The check's execution names the model x date it checked (the UI shows it).
        executions = _graphql(port, CHECKS, partition=key)["assetCheckExecutions"]
        assert [e["partition"] for e in executions] == [key]

        proc.send_signal(signal.SIGTERM)  # to it alone: it stops its webserver and daemon itself
        proc.wait(timeout=60)
        _wait_for("every process `dg dev` started to stop", 30, lambda: not group_alive(proc.pid))
    finally:
        if group_alive(proc.pid):  # the test failed: stop whatever is left
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.mark.timeout(300)
def test_a_bare_dg_dev_on_a_fresh_home_says_it_runs_without_the_projects_settings(
    tmp_path: Path,
) -> None:
    # `dg dev` itself, not `make ui`: dg and Dagster offer no setting that writes dagster.yaml
    # before its webserver and daemon read it, so the code location says what is missing.
    home = tmp_path / "dagster_home"
    log = tmp_path / "dg_dev.log"
    dg_cli = str(Path(sys.executable).with_name("dg"))
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [dg_cli, "dev", "-h", "127.0.0.1", "-p", str(_free_port())],
            cwd=REPO,
            env={
                **_project_env(tmp_path),
                "DAGSTER_HOME": str(home),
                "VIRTUAL_ENV": str(Path(sys.executable).parents[1]),
            },
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        said = f"{home} has no dagster.yaml: Dagster runs there on its own defaults"
        _wait_for("the code location's warning", 240, lambda: said in log.read_text(errors="replace"))
        assert not (home / "dagster.yaml").exists()  # nothing wrote the project's settings
    finally:
        if group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

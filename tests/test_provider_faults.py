"""Provider faults stay bounded, through the real command line on both domains: a team system on a
closed port or one that never answers is declared down after a few calls and the run ends with
the outage verdict; a provider demanding a day's wait errors the tests that needed it at once; a
truncated embeddings reply while indexing the KB, malformed or cut short on the wire, is retried;
a team system's reply cut short is retried and never counted as the service being down. Calls are
counted, never timed."""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import dagster as dg
import pytest
import yaml

from eval_pipeline.cli import main
from eval_pipeline.cli.console import SDK_LOGGERS
from eval_pipeline.core.scoring.results import ResultStatus
from eval_pipeline.core.scoring.run_document import RunDocument, read_document
from eval_pipeline.providers.circuit import BreakerSettings, breaker_for
from eval_pipeline.providers.ratelimit import REAL_CLOCK
from eval_pipeline.runtime.run_monitor import UNFINISHED, process_start
from eval_pipeline.testing.emulator.server import EmulatorHandle, start_emulator
from eval_pipeline.testing.hanging import Behaviour, HangingServer
from tests.conftest import REPO
from tests.hung_entry_point import own_breaker_cooldown
from tests.providers.conftest import FAKE_VOYAGE_KEY
from tests.quiet_instance import quiet_home

DATE = "2026-11-21"
DOWN = "service down: {url} (5 calls in a row unreachable)"


class Project(NamedTuple):
    root: Path  # where the run writes: models.yaml, results, storage, cache
    kb: Path
    banks: Path


@pytest.fixture(params=["sample", "tenant"])
def project(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    """Copies of the sample project or of the tenant-domain fixture."""
    monkeypatch.setenv("DAGSTER_HOME", str(quiet_home(tmp_path / "dagster_home")))
    if request.param == "tenant":
        tenant = request.getfixturevalue("tenant")
        return Project(tmp_path, tenant / "kb.yaml", tenant / "banks")
    shutil.copytree(REPO / "kb", tmp_path / "kb")
    shutil.copytree(REPO / "test_banks", tmp_path / "test_banks")
    return Project(tmp_path, tmp_path / "kb", tmp_path / "test_banks")


def _evaluate(project: Project, model: dict[str, Any]) -> tuple[int, RunDocument | None]:
    """`eval-pipeline run` of `model` alone; the exit code and the run document, if written."""
    root = project.root
    (root / "models.yaml").write_text(yaml.safe_dump({"schema_version": 1, "models": {"faulty": model}}))
    flags = {
        "--model": "faulty",
        "--date": DATE,
        "--kb": project.kb,
        "--banks-dir": project.banks,
        "--models-file": root / "models.yaml",
        "--results-dir": root / "results",
        "--storage-dir": root / "storage",
        "--cache-dir": root / ".cache",
    }
    code = main(["run", *(str(part) for pair in flags.items() for part in pair)])
    results = root / "results/faulty" / DATE / "results.json"
    return code, read_document(results) if results.is_file() else None


def _closed_port_url() -> str:
    with socket.socket() as probe:  # bound then closed: nothing listens there afterwards
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/retrieve"


def test_a_team_service_on_a_closed_port_is_declared_down_after_five_calls(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _closed_port_url()
    code, doc = _evaluate(project, {"system": {"kind": "http", "url": url}})  # default settings
    assert code == 3
    assert doc is not None
    results = doc.all_results()
    assert {str(r.mechanism) for r in results} == {"semantic", "state", "pattern", "always"}
    reason = "target: " + DOWN.format(url=url)
    assert {(r.status, r.error) for r in results} == {(ResultStatus.ERRORED, reason)}
    # The breaker let exactly five attempts through for all four mechanisms; the rest never left.
    breaker = breaker_for(url, BreakerSettings(), REAL_CLOCK)
    assert (breaker.calls, breaker.is_open) == (5, True)
    out = capsys.readouterr().out
    assert f"ERRORED {len(results)} test(s): {reason}" in out
    assert "COULD NOT EVALUATE semantic" in out


def test_a_team_service_that_never_answers_is_declared_down_after_five_timeouts(project: Project) -> None:
    with HangingServer() as hung:
        system = {"kind": "http", "url": hung.url, "timeout_s": 0.2}
        code, doc = _evaluate(project, {"system": system})
        assert hung.requests == 5
    # Stopped, not left behind: its accepting thread has ended (a stop used to wait 5 s for it).
    assert not any(t.name == "hanging-server" for t in threading.enumerate())
    assert code == 3
    assert doc is not None
    reason = "target: " + DOWN.format(url=hung.url)
    assert {(r.status, r.error) for r in doc.all_results()} == {(ResultStatus.ERRORED, reason)}


@pytest.mark.parametrize("behaviour", ["headers", "drip"])
def test_a_team_service_that_stalls_or_drips_after_its_headers_is_cut_off(
    project: Project, behaviour: Behaviour
) -> None:
    # A byte every 0.05 s keeps each read far inside the client's 0.5 s timeout: only a deadline
    # over the whole attempt ends it. Each call is cut after 0.5 s, so five such calls declare
    # the service down and the run ends with the outage verdict; without the deadline the
    # dripped body (a megabyte) would take days.
    with HangingServer(behaviour, drip_s=0.05) as hung:
        system = {"kind": "http", "url": hung.url, "timeout_s": 0.5}
        code, doc = _evaluate(project, {"system": system, "retry": {"max_attempts": 2, "backoff_s": 0}})
        assert hung.requests == 5
    assert code == 3
    assert doc is not None
    reason = "target: " + DOWN.format(url=hung.url)
    assert {(r.status, r.error) for r in doc.all_results()} == {(ResultStatus.ERRORED, reason)}


HUNG = "tests.hung_entry_point:never_returns"


def _unfinished_runs() -> list[str]:
    """The runs of the instance at $DAGSTER_HOME left unfinished."""
    with dg.DagsterInstance.from_config(os.environ["DAGSTER_HOME"]) as instance:
        return [f"{r.job_name}: {r.status}" for r in instance.get_runs(dg.RunsFilter(statuses=UNFINISHED))]


def _hung_calls(marks: Path) -> list[int]:
    """The processes a call to the hung entry point began in, and still runs in."""
    return [int(mark.name) for mark in marks.iterdir() if process_start(int(mark.name)) is not None]


def test_a_team_entry_point_that_never_returns_is_cut_off(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("HUNG_MARK_DIR", str(marks))
    system = {"kind": "python", "entrypoint": HUNG, "timeout_s": 0.5}
    breaker = {"cooldown_s": own_breaker_cooldown()}
    code, doc = _evaluate(project, {"system": system, "breaker": breaker})
    assert code == 3
    assert doc is not None
    late = re.compile(
        rf"target: service down: python:{re.escape(HUNG)} \(([1-4]) calls? in a row unreachable\)"
    )
    cut = f"target: the entry point '{HUNG}' gave no answer within 0.5 s"
    reasons = [r.error or "" for r in doc.all_results()]
    assert {r.status for r in doc.all_results()} == {ResultStatus.ERRORED}
    # One round was cut off: the calls in flight when the first timed out (the model's concurrency,
    # four, at most; fewer when a mechanism asks one call at a time), and the rest were never made.
    # A test asked in several trials shows its last trial's reason.
    assert all(r == cut or late.fullmatch(r) for r in reasons), set(reasons)
    assert reasons.count(cut) <= 4
    # The calls that reached the entry point had their processes killed when abandoned.
    assert 1 <= len(list(marks.iterdir())) <= 4
    assert _hung_calls(marks) == []
    assert _unfinished_runs() == []


# A stuck call in the command's own process (the team's system answers the date's shared stage),
# on SIGTERM and on Ctrl-C; and in two models' worker processes at once (`--parallel 2`, the
# system answering the semantic bank only, one call at a time each).
SIGNAL_CASES = [
    (signal.SIGTERM, ["hung"], {}),
    (signal.SIGINT, ["hung"], {}),
    (signal.SIGTERM, ["hung", "also-hung"], {"mechanisms": ["semantic"]}),
]


@pytest.mark.parametrize(
    ("stop", "models", "system"), SIGNAL_CASES, ids=["SIGTERM", "SIGINT", "SIGTERM-parallel"]
)
def test_a_signal_ends_a_run_stuck_in_an_entry_point_at_once(
    stop: signal.Signals,
    models: list[str],
    system: dict[str, Any],
    tenant: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    home = quiet_home(tmp_path / "dagster_home")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    hung = {"system": {"kind": "python", "entrypoint": HUNG, "timeout_s": 3600, **system}, "concurrency": 1}
    (tmp_path / "models.yaml").write_text(
        yaml.safe_dump({"schema_version": 1, "models": dict.fromkeys(models, hung)})
    )
    env = {**os.environ, "HUNG_MARK_DIR": str(marks), "PYTHONPATH": str(REPO)}
    command = [
        sys.executable,
        "-m",
        "eval_pipeline.cli",
        "run",
        "--date",
        DATE,
        "--parallel",
        str(len(models)),
    ]
    command += ["--kb", str(tenant / "kb.yaml"), "--banks-dir", str(tenant / "banks")]
    command += [part for model in models for part in ("--model", model)]
    run = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for _ in range(2400):  # hang guard: two minutes for each model's run to reach the entry point
            if len(list(marks.iterdir())) == len(models) or run.poll() is not None:
                break
            threading.Event().wait(0.05)
        assert len(list(marks.iterdir())) == len(models), run.communicate(timeout=60)
        run.send_signal(stop)
        out, err = run.communicate(timeout=60)  # hang guard only: it ends at once
    finally:
        run.kill()
    assert run.returncode == 3, (out + err).decode()
    assert err.decode().strip().splitlines()[-1] == "interrupted"
    assert "Traceback" not in err.decode()
    assert _hung_calls(marks) == []
    assert _unfinished_runs() == []


def _voyage_model(**extra: Any) -> dict[str, Any]:
    return {
        "embedder": {"kind": "voyage", "model_id": "voyage-3.5"},
        "reranker": {"kind": "voyage", "model_id": "rerank-2.5"},
        "rate_limit_per_min": 60_000,
        **extra,
    }


@pytest.fixture
def emulated_voyage(monkeypatch: pytest.MonkeyPatch) -> Iterator[EmulatorHandle]:
    handle = start_emulator()
    monkeypatch.setenv("VOYAGE_API_KEY", FAKE_VOYAGE_KEY)
    monkeypatch.setenv("VOYAGE_BASE_URL", handle.voyage_base_url)
    yield handle
    handle.stop()


def test_a_day_long_retry_after_is_never_waited(
    project: Project, emulated_voyage: EmulatorHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    # The third rerank call hears "429, retry-after: 86400"; one call at a time, so it is the third test.
    emulated_voyage.reconfigure(retry_after_s=86_400, fault_at=(("/v1/rerank", 3, "429"),))
    code, doc = _evaluate(project, _voyage_model(concurrency=1))
    assert doc is not None and code in (1, 3)  # the run completed and wrote its verdict
    demand = "rerank: provider asked to wait 86400 s (retry-after), more than the 120 s cap"
    semantic = doc.semantic
    assert [r.status for r in semantic[:2]] == [ResultStatus.SCORED] * 2
    assert {(r.status, r.error) for r in semantic[2:]} == {(ResultStatus.ERRORED, demand)}
    # The demand was heard once; the model's later rerank calls were never sent.
    assert emulated_voyage.stats["requests"]["POST /v1/rerank"] == 3
    assert f"ERRORED {len(semantic) - 2} test(s): {demand}" in capsys.readouterr().out


def test_a_truncated_embeddings_reply_while_indexing_is_retried(
    project: Project, emulated_voyage: EmulatorHandle
) -> None:
    emulated_voyage.reconfigure(fault_at=(("/v1/embeddings", 1, "malformed"),))
    code, doc = _evaluate(project, _voyage_model(retry={"backoff_s": 0}))
    assert doc is not None and code in (0, 1)
    assert emulated_voyage.stats["faults"] == {"malformed": 1}
    assert doc.semantic and all(r.status is ResultStatus.SCORED for r in doc.semantic)


def test_an_embeddings_reply_cut_short_on_the_wire_while_indexing_is_retried(
    project: Project, emulated_voyage: EmulatorHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    # Content-Length promised, half the body sent, the connection closed: aiohttp's payload error.
    emulated_voyage.reconfigure(fault_at=(("/v1/embeddings", 1, "cut_short"),))
    code, doc = _evaluate(project, _voyage_model(retry={"backoff_s": 0}))
    assert doc is not None and code in (0, 1)
    assert emulated_voyage.stats["faults"] == {"cut_short": 1}
    assert doc.semantic and all(r.status is ResultStatus.SCORED for r in doc.semantic)
    for name in SDK_LOGGERS:  # what the SDKs log after a command ran stays off the console too
        logging.getLogger(name).warning("an SDK's own line")
    console = "".join(capsys.readouterr())
    # The SDK's own report of the broken body (it prints to stderr) never reaches the console.
    assert "ClientPayloadError" not in console and "StreamReader" not in console
    assert "an SDK's own line" not in console


def test_a_team_reply_cut_short_is_retried_and_not_counted_as_unreachable(project: Project) -> None:
    # Three replies in a row cut short, with a breaker that opens after two unreachable calls:
    # a service that answers, however badly, is up.
    with start_emulator(fault_at=tuple(("/target", n, "cut_short") for n in (1, 2, 3))) as emu:
        model = {
            "system": {"kind": "http", "url": emu.target_url},
            "concurrency": 1,
            "retry": {"backoff_s": 0},
            "breaker": {"failures": 2},
        }
        code, doc = _evaluate(project, model)
        faults = emu.stats["faults"]
    assert faults == {"cut_short": 3}
    assert doc is not None and code in (0, 1)
    assert {r.status for r in doc.all_results()} == {ResultStatus.SCORED}
    assert not breaker_for(emu.target_url, BreakerSettings(failures=2), REAL_CLOCK).is_open


def test_an_indexing_failure_is_reported_once_as_such(
    project: Project, emulated_voyage: EmulatorHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    emulated_voyage.reconfigure(fault_at=tuple(("/v1/embeddings", n, "500") for n in range(1, 3)))
    code, doc = _evaluate(project, _voyage_model(retry={"max_attempts": 2, "backoff_s": 0}))
    assert code == 3 and doc is not None
    reason = "indexing the KB failed: HTTP 500 after 2 attempts"
    assert {(r.status, r.error) for r in doc.semantic} == {(ResultStatus.ERRORED, reason)}
    out = capsys.readouterr().out
    assert out.count(reason) == 1 and f"ERRORED {len(doc.semantic)} test(s): {reason}" in out

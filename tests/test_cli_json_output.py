"""What a command prints as JSON is nothing but JSON: `show --test` and `diff --format json` pipe
into `python -m json.tool` (or jq) as they are. Tenant domain, narrowed runs (no Dagster), the
real command in a subprocess and a real shell pipe."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

from eval_pipeline.cli import main

DATE = "2026-11-20"
TEST = "T-RENT-001"
# A narrowed run writes under results/_scoped/<scope>/: `show` and `diff` read it like any results folder.
SCOPED = Path("results/_scoped/banks-semantic+state+pattern+always__tests-T-RENT-001")
CLI = [sys.executable, "-m", "eval_pipeline.cli"]


def _piped(*args: str) -> subprocess.CompletedProcess[str]:
    """`eval-pipeline ARGS | python -m json.tool`, through a shell, pipefail on."""
    command = f"{shlex.join([*CLI, *args])} | {shlex.join([sys.executable, '-m', 'json.tool'])}"
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True, timeout=120
    )


def test_show_test_and_diff_json_pipe_into_json_tool(workdir: Path) -> None:
    data = ["--kb", "tenant/kb.yaml", "--banks-dir", "tenant/banks", "--date", DATE, "--test", TEST]
    assert main(["run", *data, "--model", "local-minilm", "--model", "local-hybrid"]) == 0

    shown = _piped("show", "--results-dir", str(SCOPED), "--test", TEST)
    assert shown.returncode == 0, shown.stderr
    entries = json.loads(shown.stdout)
    assert sorted(e["model"] for e in entries) == ["local-hybrid", "local-minilm"]
    assert {(e["date"], e["result"]["test_id"]) for e in entries} == {(DATE, TEST)}

    one = _piped("show", "--results-dir", str(SCOPED), "--model", "local-hybrid", "--test", TEST)
    assert one.returncode == 0, one.stderr
    assert [e["model"] for e in json.loads(one.stdout)] == ["local-hybrid"]

    base, head = (str(SCOPED / m / DATE / "results.json") for m in ("local-minilm", "local-hybrid"))
    diffed = _piped("diff", base, head, "--format", "json")
    # The diff gate may pass or fail (two models differ); what matters is that json.tool parsed
    # stdout, so the pipeline's status is the diff's own exit code, never json.tool's error.
    assert diffed.returncode in (0, 1), diffed.stderr
    assert set(json.loads(diffed.stdout)) == {"gate", "diff"}


def test_the_pipe_fails_on_prose(workdir: Path) -> None:
    # The check can fail: the text summary is not JSON, and json.tool says so.
    data = ["--kb", "tenant/kb.yaml", "--banks-dir", "tenant/banks", "--date", DATE, "--test", TEST]
    assert main(["run", *data, "--model", "local-minilm"]) == 0
    summary = _piped("show", "--results-dir", str(SCOPED))
    assert summary.returncode != 0 and "Expecting value" in summary.stderr

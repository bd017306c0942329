"""`run` draws a rich progress bar for the semantic tests when stderr is a terminal (a real pty
here), and none when its output is piped: then only the plain `running …` / `finished …` lines.
Inside a Dagster step fds 1 and 2 go to the compute log, so the bar draws on a duplicate of the
terminal opened before the run (`orchestration.evaluation_route.progress_terminal`). Full runs (through
Dagster) and narrowed runs (in process) alike; the piped full run is the one tests/test_cli.py makes."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from pathlib import Path

import pytest

from tests.embedding_cache import warm

BAR = "━"  # rich's bar segment
RUN = [
    *(sys.executable, "-m", "eval_pipeline.cli", "run"),
    *("--kb", "tenant/kb.yaml", "--banks-dir", "tenant/banks", "--model", "local-minilm"),
    *("--date", "2026-11-20", "--force"),
]


def _on_a_terminal(argv: list[str], cwd: Path) -> tuple[int, str]:
    """Run with stdin, stdout and stderr on a pseudo-terminal; everything it wrote there."""
    leader, follower = os.openpty()
    proc = subprocess.Popen(argv, cwd=cwd, stdin=follower, stdout=follower, stderr=follower)
    os.close(follower)
    out = bytearray()
    try:
        while True:
            ready, _, _ = select.select([leader], [], [], 300)  # a guard against a hang, not a timing
            if not ready:
                proc.kill()
                break
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(leader)
    return proc.wait(timeout=60), out.decode(errors="replace")


@pytest.fixture
def warm_workdir(workdir: Path, local_embeddings: Path) -> Path:
    """The working directory with the vectors of an earlier run in its cache: what is drawn is the
    semantic tests' progress, not the model's loading (the session's vectors, not embedded again)."""
    warm(workdir / ".cache", local_embeddings)
    return workdir


@pytest.mark.parametrize("narrowed", [[], ["--banks", "semantic"]], ids=["full", "narrowed"])
def test_a_bar_on_a_terminal(warm_workdir: Path, narrowed: list[str]) -> None:
    code, terminal = _on_a_terminal([*RUN, *narrowed], warm_workdir)
    assert code == 0, terminal
    assert BAR in terminal and "local-minilm: semantic tests" in terminal
    assert "100%" in terminal


def test_plain_lines_when_piped(warm_workdir: Path) -> None:
    # A narrowed run here; a full one in tests/test_cli.py, whose real-process evaluation is piped.
    piped = subprocess.run(
        [*RUN, "--banks", "semantic"], cwd=warm_workdir, capture_output=True, text=True, timeout=300
    )
    assert piped.returncode == 0, piped.stderr
    assert BAR not in piped.stdout + piped.stderr
    assert "\x1b[" not in piped.stdout + piped.stderr  # no cursor movement or colour either
    assert "  running model local-minilm (8 semantic retrievals) " in piped.stdout
    assert "  finished model local-minilm" in piped.stdout

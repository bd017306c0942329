"""The `eval-pipeline` process's entry point (`console`): `main`'s exit code, with every object
left moved out of the collector's sight before the exit (docs/performance.md)."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest

from eval_pipeline.cli import console, main


def test_console_returns_mains_code_and_freezes_what_is_left(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["eval-pipeline", "models"])
    expected = main()
    said = capsys.readouterr().out
    before = gc.get_freeze_count()
    kept = [[i] for i in range(1_000)]
    assert console() == expected == 0
    assert gc.get_freeze_count() >= before + len(kept)
    assert capsys.readouterr().out == said


def test_the_process_holds_what_mains_pauses_build() -> None:
    # A `main` that builds inside a pause and reports whether that stayed frozen after it.
    probe = (
        "import gc, eval_pipeline.cli as cli\n"
        "from eval_pipeline.cli.gc_pause import cyclic_gc_paused\n"
        "def main():\n"
        "    before = gc.get_freeze_count()\n"
        "    with cyclic_gc_paused():\n"
        "        kept = [[i] for i in range(10_000)]\n"
        "    print(gc.get_freeze_count() - before >= len(kept))\n"
        "    return 0\n"
        "cli.main = main\n"
        "raise SystemExit(cli.console())\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert (done.returncode, done.stdout.strip()) == (0, "True"), done.stderr


def test_the_process_says_everything_and_exits_with_the_code(workdir: Path) -> None:
    bad = subprocess.run(
        [sys.executable, "-m", "eval_pipeline.cli", "run", "--kb", "absent.yaml", "--model", "local-minilm"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2 and "absent.yaml" in bad.stderr and "Traceback" not in bad.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "eval_pipeline.cli", "models"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert listed.returncode == 0 and "local-minilm" in listed.stdout

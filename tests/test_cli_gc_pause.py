"""The cyclic garbage collector is paused where `run` only builds what it keeps (start-up, loading,
a narrowed run), leaves the collector as it found it, and runs for an evaluation through Dagster."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest

from eval_pipeline.cli import main
from eval_pipeline.cli.gc_pause import cyclic_gc_paused
from eval_pipeline.core.errors import EXIT_ERROR

DATA = ["--kb", "tenant/kb.yaml", "--banks-dir", "tenant/banks", "--model", "local-minilm"]

# The command's exit code, how many passes the collector made while it ran, and whether the
# collector is on afterwards.
_PROBE = """
import contextlib, gc, io, sys
from eval_pipeline.cli import main
passes = []
gc.callbacks.append(lambda phase, info: phase == "start" and passes.append(info["generation"]))
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
print(code, len(passes), gc.isenabled())
"""


def test_the_collector_is_paused_inside_and_restored_after() -> None:
    assert gc.isenabled()
    with cyclic_gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_an_error_inside_restores_it_and_a_disabled_collector_stays_disabled() -> None:
    with pytest.raises(RuntimeError), cyclic_gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with cyclic_gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_what_was_built_inside_is_not_walked_when_the_collector_resumes() -> None:
    with cyclic_gc_paused():
        kept = [[i] for i in range(10_000)]
    assert gc.get_count()[0] < 100  # no pass is due: the objects went to the oldest generation
    assert len(kept) == 10_000


# What stays frozen after a pause in a fresh interpreter, held or not.
_HELD_PROBE = """
import gc, sys
from eval_pipeline.cli.gc_pause import cyclic_gc_paused, hold_long_lived
if sys.argv[1] == "held":
    hold_long_lived()
before = gc.get_freeze_count()
with cyclic_gc_paused():
    kept = [[i] for i in range(10_000)]
print(gc.get_freeze_count() - before >= len(kept), gc.isenabled())
"""


@pytest.mark.parametrize(("process", "stays_frozen"), [("held", "True"), ("free", "False")])
def test_what_was_built_stays_frozen_only_where_the_process_keeps_a_frozen_heap(
    process: str, stays_frozen: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _HELD_PROBE, process], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [stays_frozen, "True"]


def test_a_narrowed_run_in_a_fresh_interpreter_makes_no_collector_pass(workdir: Path) -> None:
    # Fresh: its imports, parsing, loading and evaluation all allocate, as a user's process does.
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, "run", *DATA, "--test", "T-RENT-001"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    code, passes, enabled = done.stdout.split()
    assert (code in ("0", "1"), passes, enabled) == (True, "0", "True")


def test_an_evaluation_through_dagster_runs_with_the_collector_on(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []

    def instance() -> None:
        seen.append(gc.isenabled())
        raise RuntimeError("stopped where Dagster's run begins")

    monkeypatch.setattr("eval_pipeline.orchestration.execution.project_instance", instance)
    assert main(["run", *DATA]) == EXIT_ERROR
    assert seen == [True]
    assert gc.isenabled()

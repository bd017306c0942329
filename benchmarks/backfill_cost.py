"""What a backfill costs per model x date: `eval-pipeline backfill` of 7 past dates x 2 offline
models on the sample (one Dagster asset backfill; with no daemon running, the command carries it
out, its runs executed in its own process) against the floor, the same 14 evaluations by
`run --date D --force` (both models) in one process, date after date. Target: the backfill's
wall time per model x date <= 1.5x the floor's.

Each side works in its own copy of the sample with its own Dagster home, warmed first by an
untimed `run` of today (the embedding cache holds every vector, the instance exists). The sides
take turns, whole processes, floor first then the other way round (`benchmarks.interleave`); the
row gives both medians and spreads, the CPU of each side's processes, and the load average before
and after.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path

from benchmarks.interleave import interleaved
from benchmarks.run_paths import MODELS, sample_copy
from benchmarks.table import Row, load_average
from eval_pipeline.core.dates import today_utc

QUICK = True
DAYS = 7
ROUNDS = 2
TARGET = 1.5
MODEL_ARGS = [a for m in MODELS for a in ("--model", m)]
# The floor's commands in one interpreter, as `make bench` would call them (exit 1 is a gate).
IN_ONE_PROCESS = """import sys
from eval_pipeline.cli import main
for argv in eval(sys.argv[1]):
    if main(argv) not in (0, 1):
        sys.exit(f"eval-pipeline {' '.join(argv)} failed")
"""


def _children_cpu() -> float:
    """CPU seconds of every child this process has waited for, and of theirs."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _in_one_process(root: Path, *commands: list[str]) -> None:
    """The commands, one after the other, in one new interpreter in the copy of the sample at
    `root`: the CLI's imports paid once, the code location loaded fresh."""
    run = [sys.executable, "-c", IN_ONE_PROCESS, repr([list(c) for c in commands])]
    env = {**os.environ, "DAGSTER_HOME": str(root / ".dagster_home")}
    subprocess.run(run, check=True, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _case(root: Path, commands: list[list[str]], cpu: list[float]) -> Callable[[], None]:
    """The commands in the copy at `root`, their CPU added to `cpu`."""

    def run() -> None:
        before = _children_cpu()
        _in_one_process(root, *commands)
        cpu.append(_children_cpu() - before)

    return run


def rows() -> list[Row]:
    today = date.fromisoformat(today_utc())
    dates = [(today - timedelta(days=DAYS - i)).isoformat() for i in range(DAYS)]
    evaluations = DAYS * len(MODELS)
    floor_cpu: list[float] = []
    ours_cpu: list[float] = []
    before = load_average()
    with sample_copy() as floor_root, sample_copy() as ours_root:
        for root in (floor_root, ours_root):
            _in_one_process(root, ["run", *MODEL_ARGS])  # warm: embeddings cached, the instance made
        floor = [["run", "--date", d, "--force", *MODEL_ARGS] for d in dates]
        ours = [["backfill", "--from", dates[0], "--to", dates[-1], *MODEL_ARGS]]
        timings = interleaved(
            {"floor": _case(floor_root, floor, floor_cpu), "backfill": _case(ours_root, ours, ours_cpu)},
            rounds=ROUNDS,
        )
    after = load_average()
    ours_s, floor_s = timings["backfill"].median, timings["floor"].median
    ratio = ours_s / floor_s
    print(f"backfill cost: backfill {ours_s:.1f} s, floor {floor_s:.1f} s; load {before} -> {after}")
    per = f"{ours_s / evaluations:.2f} vs {floor_s / evaluations:.2f} s per model × date"
    return [
        Row(
            "backfill_cost",
            f"`backfill` of {DAYS} past dates × {len(MODELS)} offline models vs the same "
            f"{evaluations} evaluations by `run --date D --force` in one process, interleaved",
            f"{ratio:.2f}× the floor ({per})",
            f"≤ {TARGET}×",
            ratio <= TARGET,
            f"wall: backfill {timings['backfill'].text()}, floor {timings['floor'].text()}; "
            f"cpu with child processes, median: backfill {statistics.median(ours_cpu):.1f} s, "
            f"floor {statistics.median(floor_cpu):.1f} s; warm; "
            f"load average {before} before, {after} after",
        )
    ]

"""What a backfill costs per model x date: `eval-pipeline backfill` of 7 past dates x 2 offline
models on the sample (one Dagster asset backfill, launched by the daemon the command starts, each
of its runs a process of its own) against the floor, the same 14 evaluations by
`run --date D --force` (both models) in one process, date after date. Target: the backfill's
wall time per model x date <= 1.5x the floor's.

Each side works in its own copy of the sample with its own Dagster home, warmed first by an
untimed `run` of today (the embedding cache holds every vector, the instance exists). One round
each (a backfill of 14 evaluations is minutes on a shared 2-core machine); the CPU of each side,
its processes included, and the load average before and after are in the row.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from datetime import date, timedelta

from benchmarks.run_paths import MODELS, sample_copy
from benchmarks.table import Row, load_average
from eval_pipeline.core.dates import today_utc

DAYS = 7
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
    """CPU seconds of every child this process has waited for, and of theirs (the daemon, the
    runs the daemon waited for)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _in_one_process(*commands: list[str]) -> None:
    """The commands, one after the other, in one new interpreter: the CLI's imports paid once, the
    code location loaded fresh (a past date lowers the first date before it loads)."""
    run = [sys.executable, "-c", IN_ONE_PROCESS, repr([list(c) for c in commands])]
    subprocess.run(run, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _timed(*commands: list[str]) -> tuple[float, float]:
    """(wall, cpu) seconds of the commands in one process, in a warmed copy of the sample."""
    with sample_copy():
        _in_one_process(["run", *MODEL_ARGS])  # warm: embeddings cached, the instance made
        started, cpu = time.perf_counter(), _children_cpu()
        _in_one_process(*commands)
        return time.perf_counter() - started, _children_cpu() - cpu


def rows() -> list[Row]:
    today = date.fromisoformat(today_utc())
    dates = [(today - timedelta(days=DAYS - i)).isoformat() for i in range(DAYS)]
    evaluations = DAYS * len(MODELS)
    before = load_average()
    floor_wall, floor_cpu = _timed(*(["run", "--date", d, "--force", *MODEL_ARGS] for d in dates))
    ours_wall, ours_cpu = _timed(["backfill", "--from", dates[0], "--to", dates[-1], *MODEL_ARGS])
    after = load_average()
    ratio = ours_wall / floor_wall
    print(f"backfill cost: backfill {ours_wall:.1f} s, floor {floor_wall:.1f} s; load {before} -> {after}")
    per = f"{ours_wall / evaluations:.2f} vs {floor_wall / evaluations:.2f} s per model × date"
    return [
        Row(
            "backfill_cost",
            f"`backfill` of {DAYS} past dates × {len(MODELS)} offline models vs the same "
            f"{evaluations} evaluations by `run --date D --force` in one process",
            f"{ratio:.2f}× the floor ({per})",
            f"≤ {TARGET}×",
            ratio <= TARGET,
            f"wall: backfill {ours_wall:.1f} s, floor {floor_wall:.1f} s; cpu with child processes: "
            f"backfill {ours_cpu:.1f} s, floor {floor_cpu:.1f} s; one round each, warm; "
            f"load average {before} before, {after} after",
        )
    ]

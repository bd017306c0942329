"""Whole processes, started as a user starts them: each command (A) against its yardstick (B).

- `eval-pipeline --help` against `python -c pass`. Target ≤ 4×.
- `run --test ID` of both offline models (a narrowed run, warm embedding cache) against a process
  that only parses the same KB and bank files with PyYAML's libyaml loader and json (the parse of
  `run_paths`, as a process of its own). Target ≤ 8×.
- An unchanged `run` of both offline models, today's date and an explicit past `--date`, against
  `run --test ID`. Target ≤ 2× each.

On a temporary copy of the sample, after untimed warm-up runs (the embedding cache filled, both
dates evaluated once, the bytecode written as a normal install writes it). A and B take turns,
round after round (`benchmarks/interleave.py`: the order reversed every other round), and each
round's ratio is taken within the round, so a neighbour's burst of CPU lands on both sides. Per
process: its wall time (`time.perf_counter` around `subprocess.run`) and its CPU time (user +
system of the reaped child, `resource.getrusage(RUSAGE_CHILDREN)`). The target is on the median
of the per-round CPU ratios: on a shared machine a process's wall time is mostly its wait for a
core; the wall ratio is reported beside it.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from benchmarks.interleave import interleaved
from benchmarks.run_paths import MODELS, sample_copy
from benchmarks.table import Row, load_average
from eval_pipeline.core.dates import today_utc

# In `make bench`'s quick pass (benchmarks/__main__.py).
QUICK = True

ROUNDS = 10
HELP_TARGET, NARROW_TARGET, RERUN_TARGET = 4.0, 8.0, 2.0
STANDS = "up to date:"  # what an unchanged rerun prints when the stored evaluation answers
# The same files as `run_paths`' plain parse, in a process of its own.
PARSE = (
    "import json, pathlib, yaml\n"
    "for f in sorted(pathlib.Path('kb').rglob('*.yaml')):\n"
    "    yaml.load(f.read_text(encoding='utf-8'), Loader=yaml.CSafeLoader)\n"
    "for f in sorted(pathlib.Path('test_banks').rglob('*.json')):\n"
    "    json.loads(f.read_text(encoding='utf-8'))\n"
)


@dataclass(frozen=True)
class Pairs:
    """Both sides' per-round wall and CPU seconds, in round order."""

    a_wall: tuple[float, ...]
    a_cpu: tuple[float, ...]
    b_wall: tuple[float, ...]
    b_cpu: tuple[float, ...]

    @property
    def cpu_ratio(self) -> float:
        return statistics.median(_ratios(self.a_cpu, self.b_cpu))

    @property
    def wall_ratio(self) -> float:
        return statistics.median(_ratios(self.a_wall, self.b_wall))

    def detail(self, a: str, b: str) -> str:
        cpu = _ratios(self.a_cpu, self.b_cpu)
        return (
            f"A {a}: cpu {statistics.median(self.a_cpu):.3f} s, wall {statistics.median(self.a_wall):.2f} s; "
            f"B {b}: cpu {statistics.median(self.b_cpu):.3f} s, wall {statistics.median(self.b_wall):.2f} s "
            f"(medians of {len(cpu)} rounds); per-round cpu ratio {min(cpu):.1f}–{max(cpu):.1f}×, "
            f"wall ratio {self.wall_ratio:.1f}×; load {load_average()} after"
        )


def _ratios(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """Round by round: each A over the B it took turns with."""
    return [x / y for x, y in zip(a, b, strict=True)]


def environment(root: Path, first_date: str) -> dict[str, str]:
    env = dict(os.environ, DAGSTER_HOME=str(root / ".dagster_home"), EVAL_PIPELINE_START_DATE=first_date)
    # As a normal install runs: the first start writes the bytecode the later ones read.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def process(argv: Sequence[str], cwd: Path, env: dict[str, str], expect: str = "") -> Callable[[], float]:
    """A callable that runs `argv` to its end and returns the CPU seconds it used (its wall time
    is what `interleaved` measures around it). Exit 0 or 1 (a gate) only; `expect` must be printed."""

    def run() -> float:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode not in (0, 1) or expect not in done.stdout:
            said = " | ".join([*done.stdout.splitlines()[:3], done.stderr.strip()[-300:]])
            raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}, without {expect!r}: {said}")
        return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    return run


def pairs(a: Callable[[], float], b: Callable[[], float], rounds: int = ROUNDS) -> Pairs:
    """A and B once each a round, in turns; one untimed start of each first."""
    a(), b()
    cpu: dict[str, list[float]] = {"a": [], "b": []}
    timing = interleaved(
        {"a": lambda: cpu["a"].append(a()), "b": lambda: cpu["b"].append(b())},
        rounds,
    )
    return Pairs(timing["a"].seconds, tuple(cpu["a"]), timing["b"].seconds, tuple(cpu["b"]))


def _row(case: str, measured: Pairs, target: float, a: str, b: str) -> Row:
    ratio = measured.cpu_ratio
    return Row(
        "startup",
        case,
        f"{ratio:.1f}× B's cpu",
        f"≤ {target:g}×",
        ratio <= target,
        measured.detail(a, b),
    )


def rows() -> list[Row]:
    cli = str(Path(sys.executable).with_name("eval-pipeline"))
    models = [a for m in MODELS for a in ("--model", m)]
    past = (date.fromisoformat(today_utc()) - timedelta(days=1)).isoformat()
    with sample_copy() as root:
        env = environment(root, past)
        bank = root / "test_banks/semantic/parent_test_bank.json"
        test_id = json.loads(bank.read_text(encoding="utf-8"))["tests"][0]["test_id"]
        narrowed = process([cli, "run", "--test", test_id, *models], root, env, "narrowed run")
        print("startup: --help", flush=True)
        help_ = pairs(process([cli, "--help"], root, env), process([sys.executable, "-c", "pass"], root, env))
        print("startup: run --test", flush=True)
        narrow = pairs(narrowed, process([sys.executable, "-c", PARSE], root, env))
        # Each date is evaluated once (untimed, through Dagster) right before its reruns: the
        # evaluation of one date makes the other's stored evaluation stand no longer.
        print("startup: unchanged run, today", flush=True)
        process([cli, "run", *models], root, env)()
        rerun = pairs(process([cli, "run", *models], root, env, STANDS), narrowed)
        print("startup: unchanged run, a past date", flush=True)
        process([cli, "run", "--date", past, *models], root, env)()
        rerun_past = pairs(process([cli, "run", "--date", past, *models], root, env, STANDS), narrowed)
    return [
        _row("`eval-pipeline --help` vs `python -c pass`", help_, HELP_TARGET, "--help", "python -c pass"),
        _row(
            "`run --test ID`, 2 offline models, warm, vs a process parsing the KB and banks (libyaml, json)",
            narrow,
            NARROW_TARGET,
            "run --test",
            "parse",
        ),
        _row(
            "unchanged `run`, 2 offline models, today, vs `run --test ID`",
            rerun,
            RERUN_TARGET,
            "run",
            "run --test",
        ),
        _row(
            f"unchanged `run --date {past}` (a past date), 2 offline models, vs `run --test ID`",
            rerun_past,
            RERUN_TARGET,
            "run --date",
            "run --test",
        ),
    ]

"""Both offline models of the sample through `run`, one after the other (`--parallel 1`, the
default for models that wait on this machine's CPU) and at once (`--parallel 2`), warm, each the
best of three, interleaved (1, 2, 2, 1, 1, 2) so a neighbour's burst of CPU falls on both sides.
The load average before and after is in the row. No target: measured.
"""

from __future__ import annotations

import time

from benchmarks.run_paths import DATE, MODELS, quiet_cli, sample_copy
from benchmarks.table import Row, load_average

ORDER = (1, 2, 2, 1, 1, 2)


def rows() -> list[Row]:
    times: dict[int, list[float]] = {1: [], 2: []}
    with sample_copy():
        base = ["run", "--date", DATE, "--force"] + [a for m in MODELS for a in ("--model", m)]
        quiet_cli(*base, "--parallel", "1")  # warms the embedding cache and the instance
        before = load_average()
        for parallel in ORDER:
            started = time.perf_counter()
            quiet_cli(*base, "--parallel", str(parallel))
            times[parallel].append(time.perf_counter() - started)
        after = load_average()
    one, two = min(times[1]), min(times[2])
    print(f"parallel models: sequential {times[1]}, at once {times[2]}; load {before} -> {after}")
    runs = "; ".join(f"{p}: " + ", ".join(f"{t:.1f}" for t in times[p]) + " s" for p in (1, 2))
    return [
        Row(
            "parallel_models",
            "warm full sample `run`, 2 offline models: at once (`--parallel 2`) vs one after another",
            f"{two:.1f} s vs {one:.1f} s ({two / one:.2f}×)",
            "",
            None,
            f"best of 3, interleaved; runs {runs}; load average {before} before, {after} after",
        )
    ]

"""The pure parts of the benchmarks: the pace benchmark's floors and the one results table.
Nothing here is timed; `make bench` does the timing."""

from __future__ import annotations

import pytest

from benchmarks.__main__ import benchmarks
from benchmarks.api_pace import Tier, floor
from benchmarks.table import Row, render


def test_rate_bound_floor_lets_the_first_call_through() -> None:
    fl = floor(Tier(48, 4), rate_calls=40, calls=80, latency_s=0.3)
    assert fl.bound == "rate"
    assert fl.seconds == pytest.approx(39 * 1.25)
    assert fl.formula == "(40 − 1) calls ÷ 48/min"


def test_latency_bound_floor_counts_every_call_over_the_calls_in_flight() -> None:
    fl = floor(Tier(1000, 4), rate_calls=40, calls=80, latency_s=0.3)
    assert fl.bound == "latency"
    assert fl.seconds == pytest.approx(80 * 0.3 / 4)


def test_rate_floor_subtracts_the_limiters_one_second_burst() -> None:
    # 1000/min: the bucket holds 1000/60 calls, so 100 calls need (100 - 16.7) / 16.7 s at least.
    fl = floor(Tier(1000, 64), rate_calls=100, calls=200, latency_s=0.3)
    assert fl.bound == "rate"
    assert fl.seconds == pytest.approx((100 - 1000 / 60) * 60 / 1000)


def test_retried_calls_raise_the_floor() -> None:
    clean = floor(Tier(48, 4, 0.2), rate_calls=40, calls=80, latency_s=0.3)
    retried = floor(Tier(48, 4, 0.2), rate_calls=50, calls=100, latency_s=0.3)
    assert retried.seconds - clean.seconds == pytest.approx(10 * 1.25)


def test_table_has_one_line_a_row_and_escapes_cells() -> None:
    rows = [
        Row("b", "a|b", "1.0×", "≤ 1.1×", True),
        Row("b", "c", "2.0×", "≤ 1.1×", False, "why"),
        Row("b", "d", "info"),
    ]
    lines = render(rows).splitlines()
    assert lines[0] == "| benchmark | case | measured | target | met | detail |"
    assert len(lines) == 2 + len(rows)
    assert lines[2] == "| b | a\\|b | 1.0× | ≤ 1.1× | yes |  |"
    assert lines[3].endswith("| **no** | why |")
    assert lines[4] == "| b | d | info |  |  |  |"


def test_the_runner_finds_the_pace_benchmark() -> None:
    assert "api_pace" in benchmarks()
    assert "table" not in benchmarks()

"""A model's scores over dates as an inline SVG chart: one line per bank and one for the combined
score, over the health bands. The charts of a report share one date axis, so models line up date
for date; an unknown score breaks its line rather than drawing through a value nobody measured.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.rounding import fmt_score
from eval_pipeline.core.scoring.aggregate import HEALTH_FLOORS, Health
from eval_pipeline.core.scoring.run_document import RunDocument

COMBINED = "combined"
WIDTH, HEIGHT = 720, 262
LEFT, RIGHT, TOP, BOTTOM = 44, 80, 10, 52
# The y axis starts no higher than this, so a chart of good scores still shows the lower bands.
HIGHEST_FLOOR = 50.0


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    date: str
    label: str  # e.g. "semantic 2026-11-20: 88.5"


@dataclass(frozen=True)
class Series:
    bank: str  # a bank's name, or COMBINED
    path: str  # SVG path data; "M" starts each unbroken run of known scores
    points: list[Point]
    latest: str  # the latest known score, shown in the legend


@dataclass(frozen=True)
class Band:
    health: str
    y: float
    height: float
    label_y: float


@dataclass(frozen=True)
class TrendChart:
    model: str
    width: int
    height: int
    plot: tuple[float, float, float, float]  # left, top, right, bottom
    bands: list[Band]
    y_ticks: list[tuple[float, str]]  # position, label
    x_ticks: list[tuple[float, str]]
    series: list[Series]
    health: list[tuple[float, str, str]]  # x, date, the health of that date's evaluation
    cell: float  # the width of a date's health mark


def _scores(doc: RunDocument) -> dict[str, float | None]:
    agg = doc.aggregate
    banks: dict[str, float | None] = {m.value: b.average for m, b in agg.banks.items()}
    return {**banks, COMBINED: agg.combined_score}


def _floor(docs: Sequence[RunDocument]) -> float:
    known = [v for d in docs for v in _scores(d).values() if v is not None]
    lowest = min(known, default=100.0)
    return min(HIGHEST_FLOOR, math.floor(lowest / 10) * 10)


def _bands(floor: float, y: Callable[[float], float]) -> list[Band]:
    """The health bands from 100 down to the axis floor (the ones under it are cut off)."""
    edges = [(h.value, lo) for h, lo in HEALTH_FLOORS.items()] + [(Health.POOR.value, floor)]
    bands, top = [], 100.0
    for health, lo in edges:
        lo = max(lo, floor)
        if lo < top:
            bands.append(Band(health, y(top), y(lo) - y(top), (y(top) + y(lo)) / 2))
        top = lo
    return bands


def trend_chart(model: str, docs: Sequence[RunDocument], dates: Sequence[str]) -> TrendChart:
    """The chart of one model's evaluations (`docs`) on the report's shared date axis `dates`."""
    left, top, right, bottom = LEFT, TOP, WIDTH - RIGHT, HEIGHT - BOTTOM
    floor = _floor(docs)

    def y(score: float) -> float:
        return round(bottom - (score - floor) / (100.0 - floor) * (bottom - top), 1)

    step = (right - left) / max(1, len(dates) - 1)
    # One date sits in the middle; more spread over the plot's width.
    x_of = {
        d: round(left + i * step if len(dates) > 1 else (left + right) / 2, 1) for i, d in enumerate(dates)
    }
    by_date = {d.provenance.date: d for d in docs}
    banks = [m.value for m in Mechanism if any(m in d.aggregate.banks for d in docs)]
    series = []
    for bank in [*banks, COMBINED]:
        points: list[Point] = []
        path, pen_down, latest = [], False, "—"
        for date in dates:
            value = _scores(by_date[date]).get(bank) if date in by_date else None
            if value is None:
                pen_down = False
                continue
            latest = fmt_score(value)
            p = Point(x_of[date], y(value), date, f"{model} {bank} {date}: {latest}")
            points.append(p)
            path.append(f"{'L' if pen_down else 'M'}{p.x} {p.y}")
            pen_down = True
        series.append(Series(bank, " ".join(path), points, latest))
    marks = sorted({*HEALTH_FLOORS.values(), 100.0, floor})
    return TrendChart(
        model=model,
        width=WIDTH,
        height=HEIGHT,
        plot=(left, top, right, bottom),
        bands=_bands(floor, y),
        y_ticks=[(y(v), f"{v:.0f}") for v in marks],
        x_ticks=[(x_of[d], d[5:]) for d in dates],
        series=series,
        health=[(x_of[d], d, by_date[d].aggregate.health.value) for d in dates if d in by_date],
        cell=round(min(step * 0.9, 64.0), 1),
    )

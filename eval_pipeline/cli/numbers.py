"""Numeric flags: finite and in range, else one usage line (argparse's `type=float` takes
`nan`, `inf` and `1e400`, and a NaN threshold compares false with everything: no gate at all)."""

from __future__ import annotations

import math

from eval_pipeline.cli.exit_status import UsageError


def _allowed(low: float | None, high: float | None, above: float | None) -> str:
    parts = [f">= {low:g}" if low is not None else "", f"> {above:g}" if above is not None else ""]
    parts.append(f"<= {high:g}" if high is not None else "")
    return " and ".join(p for p in parts if p)


def check_number(
    flag: str,
    value: float | None,
    low: float | None = None,
    high: float | None = None,
    above: float | None = None,
) -> None:
    """`value` is finite, >= low, <= high and > above (each bound when given); None is unset."""
    if value is None:
        return
    if not math.isfinite(value):
        raise UsageError(f"{flag}: {value} is not a finite number")
    too_low = (low is not None and value < low) or (above is not None and value <= above)
    if too_low or (high is not None and value > high):
        raise UsageError(f"{flag}: {value:g} is out of range (must be {_allowed(low, high, above)})")

"""How a score is shown, in every output: one decimal, rounded down (89.98 shows as 89.9, never as a
"90.0" that health, judged unrounded, did not see); a change rounded toward zero, so it never reads
larger than it was. The files keep full precision.
"""

from __future__ import annotations

import math

SCORE_DECIMALS = 1
_SCALE = 10.0**SCORE_DECIMALS
# A score such as 0.7 * 100 is stored as 70.00000000000001 or 69.99999999999999: the slack keeps
# the latter from showing as 69.9.
_SLACK = 1e-9


def shown_score(value: float) -> float:
    """`value` as shown: one decimal, rounded down."""
    return math.floor(value * _SCALE + _SLACK) / _SCALE


def shown_change(value: float) -> float:
    """A difference of two scores as shown: one decimal, rounded toward zero."""
    return math.copysign(shown_score(abs(value)), value) if value else 0.0


def fmt_score(value: float | None) -> str:
    """A score as text (`shown_score`), — for none."""
    return "—" if value is None else f"{shown_score(value):.{SCORE_DECIMALS}f}"

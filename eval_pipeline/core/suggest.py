""" "Did you mean": the closest known name to a mistyped one, for error lines."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`; did you mean 'x'?` for the known name closest to `word`, or "" when none is close."""
    close = difflib.get_close_matches(word, sorted(set(known)), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""

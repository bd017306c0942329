"""Fair timing: the cases of a comparison (ours and its floor) measured in turns, in the same
process, several rounds, so a neighbour's burst of CPU lands on both rather than deciding the
ratio. Each case reports its median and its spread (fastest to slowest round)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

ROUNDS = 5


@dataclass(frozen=True)
class Timing:
    seconds: tuple[float, ...]  # one a round, in round order

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def spread(self) -> float:
        """Slowest over fastest round, minus one: how much this case moved between rounds."""
        return max(self.seconds) / min(self.seconds) - 1

    def text(self) -> str:
        return f"median {self.median:.3f} s (spread {self.spread:.0%}, {len(self.seconds)} rounds)"


def interleaved(cases: Mapping[str, Callable[[], object]], rounds: int = ROUNDS) -> dict[str, Timing]:
    """Each case once per round, in turns (the order reversed every other round, so neither
    always runs right after the other); its wall time per round."""
    names = list(cases)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names if r % 2 == 0 else reversed(names):
            started = time.perf_counter()
            cases[name]()
            times[name].append(time.perf_counter() - started)
    return {name: Timing(tuple(t)) for name, t in times.items()}

"""Caps on every wait a provider may start, and the run's overall deadline.

Providers wait when a server demands it (a 429's `retry-after`) and by their own choice (backoff
between attempts, a rate-limit slot, polling a message batch). A wait longer than `max_wait_s`,
or longer than what is left before the run deadline, is never started: the call fails at once
with a reason naming the demand, e.g. "provider asked to wait 86400 s (retry-after), more than
the 120 s cap". The deadline counts from when the model's providers are built for a run step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.providers.base import ProviderError

if TYPE_CHECKING:
    from eval_pipeline.providers.ratelimit import Clock


class WaitLimits(BaseModel):
    """`waits:` in a model's entry of models.yaml."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    max_wait_s: float = Field(
        default=120.0, gt=0, le=86_400, description="Longest single wait (retry-after, backoff, slot, poll)"
    )
    run_deadline_s: float = Field(
        default=7200.0, gt=0, le=7 * 86_400, description="No wait may end after this long into the run"
    )


class WaitRefused(ProviderError):
    """A wait that was not started: longer than the cap or than the time left."""


class WaitBudget:
    """The caps of one model's providers in one run step, on their clock."""

    def __init__(self, limits: WaitLimits, clock: Clock) -> None:
        self.limits = limits
        self.clock = clock
        self._deadline = clock.now() + limits.run_deadline_s

    def time_left(self) -> float:
        return max(0.0, self._deadline - self.clock.now())

    def longest(self) -> float:
        """The longest wait that may start now."""
        return min(self.limits.max_wait_s, self.time_left())

    def refusal(self, seconds: float, demand: str) -> str | None:
        """Why a wait of `seconds` (described by `demand`) may not start, or None."""
        if seconds > self.limits.max_wait_s:
            return f"{demand}, more than the {self.limits.max_wait_s:g} s cap"
        left = self.time_left()
        if seconds > left:
            return (
                f"{demand}, more than the {left:.0f} s left before the run deadline "
                f"({self.limits.run_deadline_s:g} s)"
            )
        return None

    def check_deadline(self) -> None:
        """No call starts once the run deadline has passed."""
        if self.time_left() <= 0:
            raise WaitRefused(f"the run deadline ({self.limits.run_deadline_s:g} s) has passed")

    def check(self, seconds: float, demand: str) -> None:
        reason = self.refusal(seconds, demand)
        if reason is not None:
            raise WaitRefused(reason)

    async def sleep(self, seconds: float, demand: str) -> None:
        self.check(seconds, demand)
        await self.clock.sleep(seconds)

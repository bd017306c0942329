"""How one provider's calls are retried, capped and cut off, bundled for the call sites."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

from eval_pipeline.providers.circuit import BreakerSettings, CircuitBreaker, breaker_for
from eval_pipeline.providers.ratelimit import Clock, Failure, RateLimiter, RetryPolicy, call_with_retry
from eval_pipeline.providers.waits import WaitBudget, WaitLimits

T = TypeVar("T")


@dataclass(frozen=True)
class FaultSettings:
    """A model's `waits:` and `breaker:` from models.yaml (defaults when absent)."""

    waits: WaitLimits = field(default_factory=WaitLimits)
    breaker: BreakerSettings = field(default_factory=BreakerSettings)


@dataclass(frozen=True)
class CallGuard:
    clock: Clock
    policy: RetryPolicy
    waits: WaitBudget
    breaker: CircuitBreaker
    secret: str | None = None  # redacted from every reason

    @classmethod
    def build(
        cls,
        service_url: str,
        clock: Clock,
        policy: RetryPolicy | None,
        faults: FaultSettings | None,
        secret: str | None = None,
    ) -> CallGuard:
        """The guard of a provider calling `service_url`; its run deadline starts now."""
        faults = faults or FaultSettings()
        return cls(
            clock=clock,
            policy=policy or RetryPolicy(),
            waits=WaitBudget(faults.waits, clock),
            breaker=breaker_for(service_url, faults.breaker, clock),
            secret=secret,
        )

    async def call(
        self,
        attempt: Callable[[], Awaitable[T]],
        classify: Callable[[BaseException], Failure | None],
        limiter: RateLimiter | None = None,
    ) -> T:
        retry = partial(call_with_retry, clock=self.clock, policy=self.policy, secret=self.secret)
        return await retry(attempt, classify, limiter=limiter, breaker=self.breaker, waits=self.waits)

"""How one provider's calls are retried, capped and cut off, bundled for the call sites.

Each attempt has one deadline for the whole exchange (connect, request, every byte of the
answer): the client's `timeout_s`, or less when the run deadline is nearer. An HTTP client's own
timeout bounds each read alone, so a service that sends its answer a byte at a time would never
end an attempt.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

from eval_pipeline.core.errors import CouldNotEvaluate
from eval_pipeline.providers.circuit import CircuitBreaker, breaker_for
from eval_pipeline.providers.models import FaultSettings
from eval_pipeline.providers.ratelimit import (
    Clock,
    Failure,
    RateLimiter,
    RetryPolicy,
    WaitBudget,
    call_with_retry,
    unreachable,
)

T = TypeVar("T")


class AttemptDeadline(CouldNotEvaluate):
    """An attempt that did not end within its deadline."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no complete answer within {round(seconds, 2):g} s")


@dataclass(frozen=True)
class CallGuard:
    clock: Clock
    policy: RetryPolicy
    waits: WaitBudget
    breaker: CircuitBreaker
    secret: str | None = None  # redacted from every reason
    attempt_timeout_s: float | None = None  # real seconds for one whole attempt (None: no limit)

    @classmethod
    def build(
        cls,
        service_url: str,
        clock: Clock,
        policy: RetryPolicy | None,
        faults: FaultSettings | None,
        secret: str | None = None,
        attempt_timeout_s: float | None = None,
    ) -> CallGuard:
        """The guard of a provider calling `service_url`, whose attempts each end within
        `attempt_timeout_s` (real seconds, like the client's own timeout); its run deadline
        starts now."""
        faults = faults or FaultSettings()
        return cls(
            clock=clock,
            policy=policy or RetryPolicy(),
            waits=WaitBudget(faults.waits, clock),
            breaker=breaker_for(service_url, faults.breaker, clock),
            secret=secret,
            attempt_timeout_s=attempt_timeout_s,
        )

    def attempt_limit(self) -> float:
        """Real seconds the next attempt may take: its timeout, or what is left of the run."""
        left = self.waits.time_left() / self.clock.speed
        return left if self.attempt_timeout_s is None else min(self.attempt_timeout_s, left)

    async def bounded(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """`attempt()`, cancelled when it passes `attempt_limit()` (`AttemptDeadline`)."""
        limit = self.attempt_limit()
        scope = asyncio.timeout(limit)
        try:
            async with scope:
                return await attempt()
        except TimeoutError:
            if not scope.expired():  # the attempt's own timeout, classified as such
                raise
            raise AttemptDeadline(limit) from None

    async def call(
        self,
        attempt: Callable[[], Awaitable[T]],
        classify: Callable[[BaseException], Failure | None],
        limiter: RateLimiter | None = None,
    ) -> T:
        def classified(exc: BaseException) -> Failure | None:
            if isinstance(exc, AttemptDeadline):  # no answer in time: counted like a client timeout
                return unreachable(str(exc))
            return classify(exc)

        return await call_with_retry(
            partial(self.bounded, attempt),
            classified,
            limiter=limiter,
            clock=self.clock,
            policy=self.policy,
            secret=self.secret,
            breaker=self.breaker,
            waits=self.waits,
        )

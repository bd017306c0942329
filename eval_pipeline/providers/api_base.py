"""What every API-backed provider shares: its model, its key (never shown), how it reaches its
service (`ApiAccess`), and the guard of its calls (`CallGuard`: retries, wait caps, its service's
breaker).

Each attempt has one deadline for the whole exchange (connect, request, every byte of the
answer): the client's `timeout_s`, or less when the run deadline is nearer. An HTTP client's own
timeout bounds each read alone, so a service that sends its answer a byte at a time would never
end an attempt.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from eval_pipeline.core.errors import CouldNotEvaluate
from eval_pipeline.providers.circuit import breaker_for
from eval_pipeline.providers.models import FaultSettings
from eval_pipeline.providers.ratelimit import (
    REAL_CLOCK,
    Clock,
    Failure,
    LoopLocal,
    RateLimiter,
    RetryPolicy,
    WaitBudget,
    call_with_retry,
    unreachable,
)

T = TypeVar("T")
Classify = Callable[[BaseException], Failure | None]


class AttemptDeadline(CouldNotEvaluate):
    """An attempt that did not end within its deadline."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no complete answer within {round(seconds, 2):g} s")


class CallGuard:
    """How one provider's calls are retried, capped and cut off."""

    def __init__(
        self,
        service_url: str,
        clock: Clock,
        policy: RetryPolicy | None,
        faults: FaultSettings | None,
        secret: str | None = None,
        attempt_timeout_s: float | None = None,
    ) -> None:
        """The guard of a provider calling `service_url`, whose attempts each end within
        `attempt_timeout_s` (real seconds, like the client's own timeout; None: no limit); its run
        deadline starts now. `secret` is redacted from every reason."""
        faults = faults or FaultSettings()
        self.clock = clock
        self.policy = policy or RetryPolicy()
        self.waits = WaitBudget(faults.waits, clock)
        self.breaker = breaker_for(service_url, faults.breaker, clock)
        self.secret = secret
        self.attempt_timeout_s = attempt_timeout_s

    async def bounded(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """`attempt()`, cancelled (`AttemptDeadline`) when it passes its timeout or what is left of
        the run, in real seconds."""
        left = self.waits.time_left() / self.clock.speed
        limit = left if self.attempt_timeout_s is None else min(self.attempt_timeout_s, left)
        scope = asyncio.timeout(limit)
        try:
            async with scope:
                return await attempt()
        except TimeoutError:
            if not scope.expired():  # the attempt's own timeout, classified as such
                raise
            raise AttemptDeadline(limit) from None

    async def call(
        self, attempt: Callable[[], Awaitable[T]], classify: Classify, limiter: RateLimiter | None = None
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


@dataclass(frozen=True)
class ApiAccess:
    """How a provider reaches its API: the key, where (None: the SDK's environment variable,
    else the public API), and how its calls are paced, retried and cut off."""

    # Neither is shown: a key is secret, and the team's service URL may embed credentials.
    api_key: str = field(default="", repr=False)  # none for the team's own service
    base_url: str | None = field(default=None, repr=False)
    limiter: RateLimiter | None = None
    clock: Clock | None = None  # default: the limiter's, so pacing and backoff share one clock
    policy: RetryPolicy | None = None
    timeout_s: float = 60.0  # one whole attempt, in real seconds
    faults: FaultSettings | None = None


class ApiProvider:
    """Subclasses keep their loop-bound client in `_client` (closed by `aclose`)."""

    _client: LoopLocal[Any]

    def __init__(self, model_id: str, access: ApiAccess, service_url: str, classify: Classify) -> None:
        self.name = self.model_id = model_id
        self._limiter = access.limiter
        self.clock = access.clock or (access.limiter.clock if access.limiter is not None else REAL_CLOCK)
        self._guard = CallGuard(
            service_url, self.clock, access.policy, access.faults, access.api_key, access.timeout_s
        )
        self._classify = classify

    def __repr__(self) -> str:  # never show the key
        return f"{type(self).__name__}(model_id={self.model_id!r})"

    async def aclose(self) -> None:
        """Close this loop's connections now (they are closed when the loop ends anyway)."""
        await self._client.aclose()

    async def _paced(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """A model call: paced by the model's limiter, retried by the shared policy."""
        return await self._guard.call(attempt, self._classify, self._limiter)

    async def _unpaced(self, call: Callable[[], Awaitable[T]]) -> T:
        """A call to a free endpoint (token counting): retried, not paced as a model call."""
        return await self._guard.call(call, self._classify)

"""What every API-backed provider shares: its model, its key (never shown), how it reaches its
service (`ApiAccess`), and the guard of its calls (retries, wait caps, its service's breaker)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from eval_pipeline.providers.call_guard import CallGuard
from eval_pipeline.providers.models import FaultSettings
from eval_pipeline.providers.ratelimit import REAL_CLOCK, Clock, Failure, LoopLocal, RateLimiter, RetryPolicy

T = TypeVar("T")
Classify = Callable[[BaseException], Failure | None]


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
        self._access = access
        self._limiter = access.limiter
        limiter_clock = access.limiter.clock if access.limiter is not None else REAL_CLOCK
        self.clock = access.clock or limiter_clock
        self._guard = CallGuard.build(
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

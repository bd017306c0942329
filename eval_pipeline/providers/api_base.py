"""What every API-backed provider shares: its model, its key (never shown), cache, pacing, and the
guard of its calls (retries, wait caps, its service's circuit breaker)."""

from __future__ import annotations

from eval_pipeline.providers.cache import ResponseCache
from eval_pipeline.providers.call_guard import CallGuard, FaultSettings
from eval_pipeline.providers.ratelimit import REAL_CLOCK, Clock, RateLimiter, RetryPolicy


class ApiProvider:
    def __init__(
        self,
        model_id: str,
        api_key: str,
        cache: ResponseCache,
        limiter: RateLimiter | None,
        clock: Clock | None,
        policy: RetryPolicy | None,
        *,
        service_url: str,
        faults: FaultSettings | None = None,
        timeout_s: float | None = None,
    ) -> None:
        self.name = model_id
        self.model_id = model_id
        self._api_key = api_key
        self._cache = cache
        self._limiter = limiter
        # Pacing and backoff share one clock, so a scaled clock speeds both up in benchmarks.
        self._clock = clock or (limiter.clock if limiter is not None else REAL_CLOCK)
        self._guard = CallGuard.build(service_url, self._clock, policy, faults, api_key, timeout_s)

    def __repr__(self) -> str:  # never show the key
        return f"{type(self).__name__}(model_id={self.model_id!r})"

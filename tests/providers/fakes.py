"""A scripted stand-in for a remote call, for tests of the retry policy, waits and breaker."""

from __future__ import annotations

import asyncio

from eval_pipeline.providers.ratelimit import Failure


class Fault(Exception):
    """What a scripted attempt raises: the retry policy sees `failure`."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.reason)
        self.failure = failure


def classify(exc: BaseException) -> Failure | None:
    return exc.failure if isinstance(exc, Fault) else None


class Service:
    """Attempts fail with `failures` in turn, then with `always` (None: they answer "ok"); it
    counts attempts and the most that were in flight at once."""

    def __init__(self, *failures: Failure, always: Failure | None = None, latency_s: float = 0.0) -> None:
        self.failures = list(failures)
        self.always = always
        self.latency_s = latency_s
        self.attempts = 0
        self.in_flight = 0
        self.peak = 0

    async def attempt(self) -> str:
        self.attempts += 1
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(self.latency_s)
            failure = self.failures.pop(0) if self.failures else self.always
            if failure is not None:
                raise Fault(failure)
            return "ok"
        finally:
            self.in_flight -= 1

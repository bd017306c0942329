"""A circuit breaker per remote service, so that a service that is down is found out in a few
calls (what counts against it, when it opens, the probe: docs/provider-faults.md).

A `per_round` breaker (a Python entry point's, whose calls are never retried) opens once the call
that fails first and every call in flight beside it have all failed. One breaker per (service URL,
settings, clock, per_round) per process, shared by every provider and run step calling that URL.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.providers.base import ProviderError

if TYPE_CHECKING:
    from eval_pipeline.providers.ratelimit import Clock

# How often a call held back by a suspect service looks again. Breakers are shared across event
# loops (run steps may each run their own), so waiting is a short poll rather than a loop-bound
# asyncio.Condition.
_ADMIT_POLL_S = 0.01


class BreakerSettings(BaseModel):
    """`breaker:` in a model's entry of models.yaml."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    failures: int = Field(
        default=5, ge=1, le=100, description="Unreachable calls in a row that declare a service down"
    )
    cooldown_s: float = Field(
        default=60.0, gt=0, le=86_400, description="How long a down service gets no call before one probe"
    )


class BreakerState(StrEnum):
    CLOSED = "closed"  # calls flow
    SUSPECT = "suspect"  # some unreachable calls in a row: calls are admitted one by one
    OPEN = "open"  # down: calls fail at once


class Outcome(StrEnum):
    ANSWERED = "answered"  # any HTTP answer: the service is up
    UNREACHABLE = "unreachable"  # could not connect, or timed out
    UNKNOWN = "unknown"  # the call failed on our side: says nothing about the service


@dataclass
class Attempt:
    """One admitted call; its caller sets how it went."""

    outcome: Outcome = Outcome.UNKNOWN


class ServiceDown(ProviderError):
    """A call not made because its service is declared down."""


def public_url(url: str) -> str:
    """`url` without credentials it may embed (it goes into results and logs)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class CircuitBreaker:
    def __init__(self, url: str, settings: BreakerSettings, clock: Clock, per_round: bool = False) -> None:
        self.url = public_url(url)
        self.settings = settings
        self.clock = clock
        self._per_round = per_round
        self._lock = threading.Lock()
        self._failures = 0
        self._limit = settings.failures  # failures in a row that open it (a round's size, if smaller)
        self._in_flight = 0
        self._opened_at: float | None = None
        self.calls = 0  # attempts admitted: what the breaker let through to the service

    @property
    def state(self) -> BreakerState:
        with self._lock:
            if self._opened_at is not None:
                return BreakerState.OPEN
            return BreakerState.SUSPECT if self._failures else BreakerState.CLOSED

    @property
    def is_open(self) -> bool:
        return self.state is BreakerState.OPEN

    def down(self) -> ServiceDown:
        n = self._limit
        return ServiceDown(f"service down: {self.url} ({n} call{'s' if n != 1 else ''} in a row unreachable)")

    def _try_admit(self) -> bool:
        """Admit one call now (True), not yet (False), or raise ServiceDown."""
        with self._lock:
            if self._opened_at is not None:
                if self.clock.now() - self._opened_at < self.settings.cooldown_s:
                    raise self.down()
                self._limit = self.settings.failures
                self._opened_at, self._failures = None, self._limit - 1  # half-open: one probe
            if self._failures and self._in_flight + self._failures >= self._limit:
                return False
            self._in_flight += 1
            self.calls += 1
            return True

    def _leave(self, outcome: Outcome) -> None:
        with self._lock:
            self._in_flight -= 1
            if outcome is Outcome.ANSWERED:
                self._failures, self._limit = 0, self.settings.failures
            elif outcome is Outcome.UNREACHABLE and self._opened_at is None:
                if self._per_round and not self._failures:  # the round: this call and those beside it
                    self._limit = min(self._limit, self._in_flight + 1)
                self._failures += 1
                if self._failures >= self._limit:
                    self._opened_at = self.clock.now()

    @asynccontextmanager
    async def attempt(self) -> AsyncIterator[Attempt]:
        """Wait until one call may go, hold it while it runs, then count how it went."""
        while not self._try_admit():
            await asyncio.sleep(_ADMIT_POLL_S)
        attempt = Attempt()
        try:
            yield attempt
        finally:
            self._leave(attempt.outcome)


_BREAKERS: dict[tuple[str, BreakerSettings, object, bool], CircuitBreaker] = {}
_REGISTRY_LOCK = threading.Lock()


def breaker_for(url: str, settings: BreakerSettings, clock: Clock, per_round: bool = False) -> CircuitBreaker:
    """This process's breaker for `url` (made on first use)."""
    key = (public_url(url), settings, clock, per_round)
    with _REGISTRY_LOCK:
        if key not in _BREAKERS:
            _BREAKERS[key] = CircuitBreaker(url, settings, clock, per_round)
        return _BREAKERS[key]

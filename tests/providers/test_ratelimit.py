from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import pytest

from eval_pipeline.providers.base import ProviderError
from eval_pipeline.providers.ratelimit import (
    Failure,
    RateLimiter,
    RetryPolicy,
    ScaledClock,
    WaitBudget,
    call_with_retry,
    failure_for_status,
    parse_retry_after,
    redact,
)
from tests.providers.conftest import LoopClock, RecordingClock, run_virtual
from tests.providers.fakes import Fault, classify

pytestmark = pytest.mark.anyio


def _failing(*failures: Failure, result: str = "ok") -> tuple[list[int], Callable[[], Awaitable[str]]]:
    """An attempt function failing with `failures` in turn, then returning `result`."""
    calls = [0]

    async def attempt() -> str:
        calls[0] += 1
        if calls[0] <= len(failures):
            raise Fault(failures[calls[0] - 1])
        return result

    return calls, attempt


# --- retry-after parsing ------------------------------------------------------------------


def test_retry_after_seconds_and_dates() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("7", now) == 7.0
    assert parse_retry_after("1.5", now) == 1.5
    assert parse_retry_after("Thu, 01 Jan 2026 12:00:30 GMT", now) == 30.0
    assert parse_retry_after("Thu, 01 Jan 2026 11:00:00 GMT", now) == 0.0  # in the past
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after(None, now) is None


def test_failure_for_status_classifies() -> None:
    assert failure_for_status(529, {"retry-after": "3"}, "busy") == Failure("HTTP 529", True, 3.0)
    assert failure_for_status(400, {}, "bad field") == Failure("HTTP 400: bad field", False)
    for status in (429, 500, 502, 503, 504):
        assert failure_for_status(status, {}, None).retryable


def test_redact_removes_the_key() -> None:
    assert redact("key sk-secret-1 leaked", "sk-secret-1") == "key [redacted] leaked"


# --- the retry policy ---------------------------------------------------------------------


async def test_retries_then_succeeds_with_exponential_backoff(clock: RecordingClock) -> None:
    calls, attempt = _failing(Failure("HTTP 503", True), Failure("timeout", True))
    policy = RetryPolicy(backoff_s=1.0, jitter_s=0.5)
    result = await call_with_retry(attempt, classify, limiter=None, clock=clock, policy=policy)
    assert result == "ok" and calls[0] == 3
    assert 1.0 <= clock.sleeps[0] <= 1.5 and 2.0 <= clock.sleeps[1] <= 2.5


async def test_retry_after_is_honoured(clock: RecordingClock) -> None:
    calls, attempt = _failing(Failure("HTTP 429", True, retry_after_s=7.0))
    policy = RetryPolicy(jitter_s=0.25)
    await call_with_retry(attempt, classify, limiter=None, clock=clock, policy=policy)
    assert calls[0] == 2 and 7.0 <= clock.sleeps[0] <= 7.25


async def test_gives_up_after_max_attempts_with_short_reason(clock: RecordingClock) -> None:
    calls, attempt = _failing(*[Failure("HTTP 503", True)] * 9)
    with pytest.raises(ProviderError, match=r"^HTTP 503 after 5 attempts$"):
        await call_with_retry(attempt, classify, limiter=None, clock=clock, policy=RetryPolicy())
    assert calls[0] == 5 and len(clock.sleeps) == 4


async def test_non_retryable_fails_at_once(clock: RecordingClock) -> None:
    calls, attempt = _failing(Failure("HTTP 401: invalid key", False))
    with pytest.raises(ProviderError, match=r"^HTTP 401: invalid key$"):
        await call_with_retry(attempt, classify, limiter=None, clock=clock, policy=RetryPolicy())
    assert calls[0] == 1 and clock.sleeps == []


async def test_deadline_stops_before_attempts_run_out(clock: RecordingClock) -> None:
    _, attempt = _failing(*[Failure("HTTP 429", True, retry_after_s=30.0)] * 9)
    policy = RetryPolicy(deadline_s=70.0, jitter_s=0.0)
    with pytest.raises(ProviderError, match=r"HTTP 429 after 3 attempts \(retry deadline 70 s\)"):
        await call_with_retry(attempt, classify, limiter=None, clock=clock, policy=policy)
    assert clock.sleeps == [30.0, 30.0]


async def test_unclassified_errors_propagate_unchanged(clock: RecordingClock) -> None:
    async def attempt() -> str:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        await call_with_retry(attempt, classify, limiter=None, clock=clock, policy=RetryPolicy())


async def test_secret_is_redacted_from_the_reason(clock: RecordingClock) -> None:
    _, attempt = _failing(Failure("HTTP 400: bad key sk-abcdef", False))
    with pytest.raises(ProviderError) as info:
        await call_with_retry(
            attempt, classify, limiter=None, clock=clock, policy=RetryPolicy(), secret="sk-abcdef"
        )
    assert "sk-abcdef" not in str(info.value)


async def test_each_retry_takes_a_new_limiter_slot(clock: RecordingClock) -> None:
    entered = [0]

    class CountingLimiter(RateLimiter):
        @asynccontextmanager
        async def slot(self, waits: WaitBudget | None = None) -> AsyncIterator[None]:
            entered[0] += 1
            async with super().slot(waits):
                yield

    limiter = CountingLimiter(60_000, 4, clock=clock)
    calls, attempt = _failing(Failure("HTTP 500", True), Failure("HTTP 502", True))
    await call_with_retry(attempt, classify, limiter=limiter, clock=clock, policy=RetryPolicy())
    assert entered[0] == calls[0] == 3


# --- the rate limiter ---------------------------------------------------------------------


async def _paced(limiter: RateLimiter, n: int) -> float:
    clock = limiter.clock
    start = clock.now()
    for _ in range(n):
        async with limiter.slot():
            pass
    return clock.now() - start


# Pacing is measured on a virtual-time event loop: exact, and immune to a loaded machine.


def test_small_bucket_paces_evenly_from_the_start() -> None:
    # 48/min: one request every 1.25 s, no initial burst; 9 requests span 8 gaps = 10 s.
    elapsed = run_virtual(_paced(RateLimiter(48, 4, clock=LoopClock()), 9))
    assert elapsed == pytest.approx(10.0, abs=0.01)


def test_burst_is_at_most_one_seconds_share() -> None:
    # 600/min = 10/s: a burst of 10, then 10 per second -> 30 requests take 2 s.
    elapsed = run_virtual(_paced(RateLimiter(600, 64, clock=LoopClock()), 30))
    assert elapsed == pytest.approx(2.0, abs=0.01)


async def test_concurrency_cap_holds() -> None:
    limiter = RateLimiter(60_000, 3, clock=ScaledClock(100.0))
    in_flight, peak = [0], [0]

    async def work() -> None:
        async with limiter.slot():
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
            await asyncio.sleep(0.005)
            in_flight[0] -= 1

    await asyncio.gather(*(work() for _ in range(12)))
    assert peak[0] == 3


def test_limiter_survives_a_new_event_loop() -> None:
    limiter = RateLimiter(6000, 2, clock=ScaledClock(100.0))
    for _ in range(2):  # each asyncio.run is a fresh loop, as in separate Dagster steps
        asyncio.run(_paced(limiter, 3))


def test_rejects_nonsense_settings() -> None:
    with pytest.raises(ValueError):
        RateLimiter(0, 1)
    with pytest.raises(ValueError):
        ScaledClock(0)


async def test_retry_after_never_waits_less_than_the_backoff() -> None:
    clock = RecordingClock()
    calls = [0]

    async def attempt() -> str:
        calls[0] += 1
        if calls[0] == 1:
            raise RuntimeError("throttled")
        return "ok"

    def classify(exc: BaseException) -> Failure | None:
        return Failure("HTTP 429", retryable=True, retry_after_s=0.0)

    policy = RetryPolicy(max_attempts=3, backoff_s=2.0, jitter_s=0.0)
    assert await call_with_retry(attempt, classify, limiter=None, clock=clock, policy=policy) == "ok"
    assert clock.sleeps == [2.0]  # "retry after 0 s" does not make us hammer the server


async def test_a_429_pauses_the_whole_limiter_not_one_request() -> None:
    clock = RecordingClock()
    limiter = RateLimiter(60_000, 4, clock=clock)

    async def throttled() -> str:
        raise RuntimeError("429")

    def classify(exc: BaseException) -> Failure | None:
        return Failure("HTTP 429", retryable=False, retry_after_s=7.0)

    policy = RetryPolicy(max_attempts=1, jitter_s=0.0)
    with pytest.raises(ProviderError):
        await call_with_retry(throttled, classify, limiter=limiter, clock=clock, policy=policy)
    async with limiter.slot():  # another request of the same model, after the 429
        pass
    assert clock.sleeps == [7.0] and clock.now() == 7.0

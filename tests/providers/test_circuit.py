"""The circuit breaker: attempts, calls and states counted on virtual clocks (no wall-clock time)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from eval_pipeline.providers.circuit import (
    BreakerSettings,
    BreakerState,
    CircuitBreaker,
    Outcome,
    ServiceDown,
    breaker_for,
    public_url,
)
from eval_pipeline.providers.ratelimit import Failure, RetryPolicy, call_with_retry, unreachable
from tests.providers.conftest import LoopClock, RecordingClock, run_virtual
from tests.providers.fakes import Service, classify

URL = "http://team.invalid/retrieve"
DOWN = f"service down: {URL} (5 calls in a row unreachable)"


def _call(
    service: Callable[[], Awaitable[str]], breaker: CircuitBreaker, clock: LoopClock | RecordingClock
) -> Awaitable[str]:
    return call_with_retry(
        service, classify, limiter=None, clock=clock, policy=RetryPolicy(), breaker=breaker
    )


def test_a_refusing_service_gets_five_attempts_then_every_call_fails_at_once() -> None:
    clock = LoopClock()
    breaker = CircuitBreaker(URL, BreakerSettings(), clock)
    service = Service(always=unreachable("connection error"))

    async def main() -> tuple[list[BaseException | str], float]:
        gate = asyncio.Semaphore(4)  # the model's concurrency

        async def one() -> str:
            async with gate:
                return await _call(service.attempt, breaker, clock)

        started = clock.now()
        outcomes = await asyncio.gather(*(one() for _ in range(40)), return_exceptions=True)
        return outcomes, clock.now() - started

    outcomes, elapsed = run_virtual(main())
    assert service.attempts == breaker.calls == 5
    assert breaker.state is BreakerState.OPEN
    assert all(isinstance(o, ServiceDown) and str(o) == DOWN for o in outcomes)
    # Four first attempts at once, one probe after the first backoff (1 s + up to 1 s jitter).
    assert elapsed <= 2.0


def test_calls_in_flight_never_exceed_the_limit_once_a_failure_is_counted() -> None:
    clock = LoopClock()
    breaker = CircuitBreaker(URL, BreakerSettings(failures=3), clock)
    service = Service(always=unreachable("timeout"), latency_s=30.0)  # each attempt times out after 30 s

    async def main() -> list[BaseException | str]:
        with pytest.raises(ServiceDown):  # one timeout counted, not yet down: retried, then down
            await _call(service.attempt, breaker, clock)
        return await asyncio.gather(
            *(_call(service.attempt, breaker, clock) for _ in range(10)), return_exceptions=True
        )

    outcomes = run_virtual(main())
    # The first call's three attempts (one at a time) declared the service down; the ten calls
    # behind it never went out.
    assert service.attempts == 3 and service.peak == 1
    assert all(isinstance(o, ServiceDown) for o in outcomes)


def test_a_burst_after_one_failure_is_held_to_the_attempts_left() -> None:
    clock = LoopClock()
    breaker = CircuitBreaker(URL, BreakerSettings(failures=3), clock)
    service = Service(always=unreachable("timeout"), latency_s=30.0)
    single = RetryPolicy(max_attempts=1)

    async def main() -> list[BaseException | str]:
        with pytest.raises(Exception, match="timeout after 1 attempt"):
            await call_with_retry(
                service.attempt, classify, limiter=None, clock=clock, policy=single, breaker=breaker
            )
        return await asyncio.gather(
            *(_call(service.attempt, breaker, clock) for _ in range(10)), return_exceptions=True
        )

    outcomes = run_virtual(main())
    # One failure counted, three allowed: two more attempts in flight at most, then down.
    assert service.attempts == 3 and service.peak == 2 and breaker.is_open
    assert all(isinstance(o, ServiceDown) and "3 calls in a row" in str(o) for o in outcomes)


async def _sequential(breaker: CircuitBreaker, clock: RecordingClock, *failures: Failure | None) -> list[str]:
    """One call per failure in turn (None: it succeeds), each with a single attempt."""
    outcomes = []
    for failure in failures:
        service = Service(always=failure)
        try:
            await call_with_retry(
                service.attempt,
                classify,
                limiter=None,
                clock=clock,
                policy=RetryPolicy(max_attempts=1),
                breaker=breaker,
            )
            outcomes.append("ok")
        except Exception as exc:
            outcomes.append(str(exc))
    return outcomes


@pytest.mark.anyio
async def test_any_answer_clears_the_count(clock: RecordingClock) -> None:
    breaker = CircuitBreaker(URL, BreakerSettings(), clock)
    down, answered = unreachable("connection error"), Failure("HTTP 503", True)
    outcomes = await _sequential(breaker, clock, *[down] * 4, answered, *[down] * 4)
    assert breaker.state is BreakerState.SUSPECT and breaker.calls == 9
    assert outcomes[4] == "HTTP 503 after 1 attempt"
    assert await _sequential(breaker, clock, down) == [DOWN]
    assert breaker.is_open


@pytest.mark.anyio
async def test_after_the_cooldown_one_probe_decides(clock: RecordingClock) -> None:
    breaker = CircuitBreaker(URL, BreakerSettings(failures=2, cooldown_s=60), clock)
    down = unreachable("connection error")
    await _sequential(breaker, clock, down, down)
    assert breaker.is_open
    clock.t += 59.0
    assert await _sequential(breaker, clock, None) == [f"service down: {URL} (2 calls in a row unreachable)"]
    assert breaker.calls == 2  # refused without a call
    clock.t += 1.0
    assert await _sequential(breaker, clock, down) == [f"service down: {URL} (2 calls in a row unreachable)"]
    assert breaker.calls == 3 and breaker.is_open  # the probe failed: open again at once
    clock.t += 60.0
    assert await _sequential(breaker, clock, None, None) == ["ok", "ok"]
    assert breaker.state is BreakerState.CLOSED


def test_one_breaker_per_service_without_credentials() -> None:
    clock = RecordingClock()
    a = breaker_for("http://user:secret@host.invalid:8080/x?q=1", BreakerSettings(), clock)
    assert a is breaker_for("http://host.invalid:8080/x", BreakerSettings(), clock)
    assert a.url == public_url("http://user:secret@host.invalid:8080/x") == "http://host.invalid:8080/x"
    assert a is not breaker_for("http://host.invalid:8080/x", BreakerSettings(failures=2), clock)


async def _entry_point_call(breaker: CircuitBreaker, answers_after_s: float | None) -> str:
    """One call as a Python entry point's target makes it: no retry; an answer after
    `answers_after_s`, or (None) none before its 3 s timeout."""
    async with breaker.attempt() as admitted:
        if answers_after_s is None:
            await asyncio.sleep(3.0)
            admitted.outcome = Outcome.UNREACHABLE
            return "timeout"
        await asyncio.sleep(answers_after_s)
        admitted.outcome = Outcome.ANSWERED
        return "ok"


def _round_of_hung_calls(per_round: bool, concurrency: int) -> tuple[CircuitBreaker, list[str], float]:
    """Forty calls that never answer, `concurrency` at a time, on virtual time."""
    clock = LoopClock()
    breaker = CircuitBreaker("python:pkg.mod:attr", BreakerSettings(), clock, per_round=per_round)

    async def main() -> tuple[list[str], float]:
        gate = asyncio.Semaphore(concurrency)

        async def one() -> str:
            async with gate:
                try:
                    return await _entry_point_call(breaker, None)
                except ServiceDown as exc:
                    return str(exc)

        started = clock.now()
        outcomes = await asyncio.gather(*(one() for _ in range(40)))
        return outcomes, clock.now() - started

    outcomes, elapsed = run_virtual(main())
    return breaker, outcomes, elapsed


@pytest.mark.parametrize(("concurrency", "counted"), [(4, 4), (1, 1), (8, 5)])
def test_a_round_of_calls_that_all_time_out_opens_a_per_round_breaker(concurrency: int, counted: int) -> None:
    breaker, outcomes, elapsed = _round_of_hung_calls(per_round=True, concurrency=concurrency)
    # One round, cut at the same timeout, and no call after it; a round larger than `failures`
    # (5) opens it at the fifth failure, the rest of the round already in flight.
    down = (
        f"service down: python:pkg.mod:attr ({counted} call{'s' if counted > 1 else ''} in a row unreachable)"
    )
    assert (breaker.calls, breaker.is_open) == (concurrency, True)
    assert elapsed == pytest.approx(3.0, abs=0.1)
    assert outcomes == ["timeout"] * concurrency + [down] * (40 - concurrency)


def test_a_breaker_counting_calls_waits_for_the_probe_after_a_round() -> None:
    # The same forty calls against a service's breaker: the round leaves it suspect, a fifth call
    # (the probe) times out three seconds later.
    breaker, outcomes, elapsed = _round_of_hung_calls(per_round=False, concurrency=4)
    assert (breaker.calls, breaker.is_open) == (5, True)
    assert elapsed == pytest.approx(6.0, abs=0.1)
    assert outcomes.count("timeout") == 5


def test_a_round_in_which_one_call_answers_leaves_a_per_round_breaker_closed() -> None:
    clock = LoopClock()
    breaker = CircuitBreaker("python:pkg.mod:slow", BreakerSettings(), clock, per_round=True)

    async def main() -> list[str]:
        # Three calls time out at 3 s; the fourth answers a second later, after them.
        first = await asyncio.gather(*(_entry_point_call(breaker, d) for d in (None, None, None, 4.0)))
        return [*first, await _entry_point_call(breaker, 0.5)]

    assert run_virtual(main()) == ["timeout", "timeout", "timeout", "ok", "ok"]
    assert breaker.state is BreakerState.CLOSED and breaker.calls == 5


@pytest.mark.anyio
async def test_after_the_cooldown_a_per_round_breaker_probes_once(clock: RecordingClock) -> None:
    breaker = CircuitBreaker("python:pkg.mod:once", BreakerSettings(cooldown_s=60), clock, per_round=True)

    async def timed_out() -> None:
        async with breaker.attempt() as admitted:
            admitted.outcome = Outcome.UNREACHABLE

    await timed_out()  # a round of one call
    assert breaker.is_open
    with pytest.raises(ServiceDown, match=r"\(1 call in a row unreachable\)$"):
        await timed_out()
    clock.t += 60.0
    await timed_out()  # the probe: open again at once
    assert breaker.is_open and breaker.calls == 2
    clock.t += 60.0
    async with breaker.attempt() as admitted:
        admitted.outcome = Outcome.ANSWERED
    assert breaker.state is BreakerState.CLOSED

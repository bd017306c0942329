"""Pacing and retries shared by every API provider.

`RateLimiter`: one model's per-minute allowance (aiolimiter leaky bucket) and concurrency cap.
`call_with_retry`: the one retry policy (tenacity) for 429/500/502/503/504/529, timeouts and
connection errors: exponential backoff with jitter, honouring `retry-after`, bounded in attempts
and total time, ending in a `ProviderError` such as "HTTP 503 after 5 attempts". Retries go back
through the limiter, paced like first attempts; an unreachable service is cut off (`circuit`).

Every wait, demanded (a 429's `retry-after`) or chosen (backoff, a rate-limit slot, polling a
batch), is capped (`WaitBudget`): one beyond `max_wait_s` or the run deadline (counted from when
the model's providers are built for a run step) is never started, and the call fails at once
naming the demand. Time is read through a `Clock`, so tests can run waits fast (`ScaledClock`).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from aiolimiter import AsyncLimiter
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception

from eval_pipeline.providers.base import ProviderError
from eval_pipeline.providers.circuit import Attempt, CircuitBreaker, Outcome

if TYPE_CHECKING:
    from eval_pipeline.providers.models import WaitLimits

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504, 529})


class Clock(Protocol):
    """Where providers read time and wait; `speed` is clock seconds per real second (aiolimiter
    schedules on the event loop's real clock, so the limiter divides its period by it)."""

    @property
    def speed(self) -> float: ...

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class ScaledClock:
    """A clock running `factor` times real time: 1 in a run, faster in benchmarks and tests."""

    def __init__(self, factor: float) -> None:
        if factor <= 0:
            raise ValueError("factor must be positive")
        self.speed = factor
        self._origin = time.monotonic()

    def now(self) -> float:
        return (time.monotonic() - self._origin) * self.speed

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds / self.speed)


REAL_CLOCK = ScaledClock(1.0)


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

    def check(self, seconds: float, demand: str) -> None:
        if (reason := self.refusal(seconds, demand)) is not None:
            raise WaitRefused(reason)

    async def sleep(self, seconds: float, demand: str) -> None:
        self.check(seconds, demand)
        await self.clock.sleep(seconds)


_CLOSERS: set[asyncio.Task[None]] = set()


class LoopLocal(Generic[T]):
    """One value per running event loop, made on first use in that loop: asyncio primitives and
    pooled HTTP clients belong to their loop, and Dagster steps or scripts may each run their own.
    With `close`, the value is closed inside its loop when the loop's runner cancels leftover tasks
    at exit (`asyncio.run` does), or earlier by `aclose()`, never by the garbage collector from a
    dead loop."""

    def __init__(
        self, factory: Callable[[], T], close: Callable[[T], Awaitable[object]] | None = None
    ) -> None:
        self._factory = factory
        self._close = close
        self._loop: asyncio.AbstractEventLoop | None = None
        self._value: T | None = None
        self._closer: asyncio.Task[None] | None = None

    def get(self) -> T:
        loop = asyncio.get_running_loop()
        if self._value is None or loop is not self._loop:
            value = self._factory()
            self._value, self._loop = value, loop
            if self._close is not None:
                self._closer = loop.create_task(self._close_at_exit(value, self._close))
                # The loop keeps only weak references to tasks; this one must outlive its owner.
                _CLOSERS.add(self._closer)
                self._closer.add_done_callback(_CLOSERS.discard)
        return self._value

    @staticmethod
    async def _close_at_exit(value: T, close: Callable[[T], Awaitable[object]]) -> None:
        try:
            await asyncio.get_running_loop().create_future()  # parked until cancelled
        finally:
            await close(value)

    async def aclose(self) -> None:
        """Close the running loop's value now, if one was made."""
        closer, self._closer = self._closer, None
        if closer is not None and self._loop is asyncio.get_running_loop():
            closer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await closer
        self._value = self._loop = None


class RateLimiter:
    """One model's request pace and concurrency cap: `async with limiter.slot(): ...`. The bucket
    holds one second's share of the per-minute rate (at least one request), so a burst never
    front-loads the minute: at 48/min requests leave every 1.25 s, and N calls take about N / rate."""

    def __init__(self, requests_per_min: float, concurrency: int, clock: Clock = REAL_CLOCK) -> None:
        if requests_per_min <= 0 or concurrency < 1:
            raise ValueError("requests_per_min must be positive and concurrency at least 1")
        self.requests_per_min = requests_per_min
        self.concurrency = concurrency
        self.clock = clock
        capacity = max(1.0, requests_per_min / 60.0)
        # aiolimiter waits on the event loop's real clock, so a faster clock shortens the period.
        period_s = capacity * 60.0 / requests_per_min / clock.speed
        self._gates = LoopLocal(lambda: (AsyncLimiter(capacity, period_s), asyncio.Semaphore(concurrency)))
        self._resume_at = 0.0  # clock time before which no request may start (see `pause`)
        self._demand = ""  # what set `_resume_at`, for a refused wait's reason

    def pause(self, seconds: float, demand: str = "") -> None:
        """Hold every request of this model for `seconds` (a 429's retry-after is the server
        speaking about the whole account, not the one request that heard it)."""
        resume_at = self.clock.now() + seconds
        if resume_at > self._resume_at:
            self._resume_at = resume_at
            self._demand = demand or f"provider asked to wait {seconds:g} s"

    @asynccontextmanager
    async def slot(self, waits: WaitBudget | None = None) -> AsyncIterator[None]:
        """A request slot; with `waits`, a pause past its cap or the run deadline is refused at
        once and a rate-limit slot not free within them is given up (`WaitRefused`)."""
        bucket, slots = self._gates.get()
        # Concurrency first: a rate token taken while queueing for a slot would go unused and
        # let a burst through later.
        async with slots:
            while (wait := self._resume_at - self.clock.now()) > 0:
                if waits is not None:
                    waits.check(wait, self._demand)
                await self.clock.sleep(wait)
            if waits is None:
                await bucket.acquire()
            else:
                await self._acquire_within(bucket, waits)
            yield

    async def _acquire_within(self, bucket: AsyncLimiter, waits: WaitBudget) -> None:
        longest = waits.longest()
        try:
            # aiolimiter waits on the loop's real clock: a faster clock shortens the bound too.
            await asyncio.wait_for(bucket.acquire(), longest / self.clock.speed)
        except TimeoutError:
            raise WaitRefused(
                f"no rate-limit slot ({self.requests_per_min:g} requests/min) within {longest:.0f} s, "
                f"the longest wait allowed (cap {waits.limits.max_wait_s:g} s)"
            ) from None


@dataclass(frozen=True)
class Failure:
    """How the retry policy sees one failed attempt."""

    reason: str  # short, safe to show: "HTTP 503", "timeout", "connection error", ...
    retryable: bool
    retry_after_s: float | None = None
    unreachable: bool = False  # no answer from the service at all (counts toward its breaker)


def unreachable(reason: str) -> Failure:
    """Could not connect, or no answer in time: retried, and counted as an outage."""
    return Failure(reason, retryable=True, unreachable=True)


def broken_off(reason: str) -> Failure:
    """Connected, then the reply broke off (a body cut short, the connection dropped): retried,
    but not counted as an outage, for the service was there to accept the call."""
    return Failure(reason, retryable=True)


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    deadline_s: float = 300.0  # total clock time across attempts and waits
    backoff_s: float = 1.0  # first backoff; doubles per retry
    max_backoff_s: float = 30.0
    jitter_s: float = 1.0


class _AttemptFailed(Exception):
    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.reason)
        self.failure = failure


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a `retry-after` header: delta-seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def failure_for_status(status: int, headers: Mapping[str, str], detail: str | None) -> Failure:
    """Classify an HTTP error response; non-retryable ones keep a short detail for the user."""
    retryable = status in RETRYABLE_STATUS
    reason = f"HTTP {status}"
    if detail and not retryable:
        reason = f"{reason}: {detail[:200]}"
    return Failure(reason, retryable, parse_retry_after(headers.get("retry-after")))


def redact(text: str, secret: str | None) -> str:
    """Remove an API key from text that may reach logs or results."""
    if secret and len(secret) >= 4:
        return text.replace(secret, "[redacted]")
    return text


def _wait(policy: RetryPolicy, state: RetryCallState) -> float:
    """Wait what the server asked for (plus jitter to spread a herd), else exponential backoff."""
    jitter = random.uniform(0.0, policy.jitter_s)
    backoff = min(policy.max_backoff_s, policy.backoff_s * 2.0 ** (state.attempt_number - 1))
    exc = state.outcome.exception() if state.outcome is not None else None
    if isinstance(exc, _AttemptFailed) and exc.failure.retry_after_s is not None:
        # Never sooner than our own backoff: a server saying "retry in 0 s" must not spin us.
        return max(exc.failure.retry_after_s, backoff) + jitter
    return backoff + jitter


async def call_with_retry(
    attempt: Callable[[], Awaitable[T]],
    classify: Callable[[BaseException], Failure | None],
    *,
    limiter: RateLimiter | None,
    clock: Clock,
    policy: RetryPolicy,
    secret: str | None = None,
    breaker: CircuitBreaker | None = None,
    waits: WaitBudget | None = None,
) -> T:
    """Run `attempt` under the limiter until it succeeds or the policy gives up.

    `classify` maps a provider's exception to a `Failure` (None: not an API failure, re-raised as
    is). The final failure becomes `ProviderError(reason)`, with `secret` redacted. With a
    `breaker`, a service declared down gets no attempt (`ServiceDown`); with `waits`, a
    demanded or chosen wait beyond the cap or the run deadline is not started (`WaitRefused`).
    """
    attempts = 0

    async def once() -> T:
        nonlocal attempts
        # Without a breaker, the attempt's outcome goes nowhere.
        admission = breaker.attempt() if breaker is not None else contextlib.nullcontext(Attempt())
        async with admission as admitted:
            if waits is not None and waits.time_left() <= 0:  # no call starts past the run deadline
                raise WaitRefused(f"the run deadline ({waits.limits.run_deadline_s:g} s) has passed")
            attempts += 1
            try:
                async with limiter.slot(waits) if limiter is not None else contextlib.nullcontext():
                    result = await attempt()
            except WaitRefused:
                raise
            except Exception as exc:
                failure = classify(exc)
                if failure is None:
                    raise
                if (seconds := failure.retry_after_s) is not None:
                    # The whole model holds as asked; a demand beyond the caps fails this call at
                    # once, and the limiter keeps it so that the model's other calls fail at once too.
                    demand = f"provider asked to wait {seconds:g} s (retry-after)"
                    if limiter is not None:
                        limiter.pause(seconds, demand)
                    if waits is not None:
                        waits.check(seconds, demand)
                admitted.outcome = Outcome.UNREACHABLE if failure.unreachable else Outcome.ANSWERED
                raise _AttemptFailed(failure) from exc
            admitted.outcome = Outcome.ANSWERED
            return result

    started = clock.now()
    refused: str | None = None

    def stop(state: RetryCallState) -> bool:
        """After the last attempt, when the coming wait would pass the call's deadline or the
        waits' cap or run deadline (`refused` says which), or once the service is declared down."""
        nonlocal refused
        if state.attempt_number >= policy.max_attempts or (breaker is not None and breaker.is_open):
            return True
        backoff = state.upcoming_sleep
        refused = waits.refusal(backoff, f"backoff of {backoff:.0f} s") if waits is not None else None
        return refused is not None or clock.now() - started + backoff > policy.deadline_s

    retrying = AsyncRetrying(
        sleep=clock.sleep,
        stop=stop,
        wait=partial(_wait, policy),
        retry=retry_if_exception(lambda e: isinstance(e, _AttemptFailed) and e.failure.retryable),
        reraise=True,
    )
    try:
        return await retrying(once)
    except _AttemptFailed as exc:
        if breaker is not None and breaker.is_open:
            raise breaker.down() from None
        reason = refused or exc.failure.reason
        if refused is None and exc.failure.retryable:
            reason += f" after {attempts} attempt{'s' if attempts != 1 else ''}"
            reason += f" (retry deadline {policy.deadline_s:g} s)" if attempts < policy.max_attempts else ""
        raise ProviderError(redact(reason, secret)) from None

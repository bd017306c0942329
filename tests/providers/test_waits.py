"""Wait caps and the run deadline: a wait past either is never started (virtual clocks only)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline.core.inputs.stage_depths import SELECTION_K
from eval_pipeline.providers.api_base import ApiAccess
from eval_pipeline.providers.base import RerankCandidate, RerankRequest
from eval_pipeline.providers.cache import ResponseCache
from eval_pipeline.providers.claude_rerank import ClaudeReranker
from eval_pipeline.providers.models import ConfigError, FaultSettings, WaitLimits, load_models
from eval_pipeline.providers.ratelimit import (
    Failure,
    RateLimiter,
    RetryPolicy,
    WaitBudget,
    WaitRefused,
    call_with_retry,
)
from eval_pipeline.testing.emulator.server import EmulatorHandle, start_emulator
from tests.providers.conftest import FAKE_ANTHROPIC_KEY, LoopClock, RecordingClock, run_virtual
from tests.providers.fakes import Service, classify

DEMAND = "provider asked to wait 86400 s (retry-after), more than the 120 s cap"


@pytest.mark.anyio
async def test_a_day_long_retry_after_is_refused_for_this_call_and_the_models_others(
    clock: RecordingClock,
) -> None:
    limiter = RateLimiter(60_000, 4, clock=clock)
    waits = WaitBudget(WaitLimits(), clock)
    day = Failure("HTTP 429", retryable=True, retry_after_s=86_400)
    first, second = Service(day), Service()
    for service in (first, second):
        with pytest.raises(WaitRefused) as info:
            await call_with_retry(
                service.attempt, classify, limiter=limiter, clock=clock, policy=RetryPolicy(), waits=waits
            )
        assert str(info.value) == DEMAND
    # The demand was heard once; no wait was started and the model's next call was never made.
    assert (first.attempts, second.attempts, clock.sleeps) == (1, 0, [])


@pytest.mark.anyio
async def test_a_retry_after_within_the_cap_is_honoured(clock: RecordingClock) -> None:
    service = Service(Failure("HTTP 429", retryable=True, retry_after_s=90))
    waits = WaitBudget(WaitLimits(), clock)
    policy = RetryPolicy(jitter_s=0)
    assert await call_with_retry(
        service.attempt, classify, limiter=None, clock=clock, policy=policy, waits=waits
    )
    assert (service.attempts, clock.sleeps) == (2, [90.0])


@pytest.mark.anyio
async def test_no_backoff_may_pass_the_run_deadline(clock: RecordingClock) -> None:
    busy = Failure("HTTP 503", retryable=True)
    service = Service(*[busy] * 4)
    waits = WaitBudget(WaitLimits(run_deadline_s=10), clock)
    policy = RetryPolicy(backoff_s=1.0, jitter_s=0)
    with pytest.raises(Exception) as info:
        await call_with_retry(
            service.attempt, classify, limiter=None, clock=clock, policy=policy, waits=waits
        )
    # Backoffs of 1, 2 and 4 s were waited; the 8 s one would end past the deadline.
    assert clock.sleeps == [1.0, 2.0, 4.0] and service.attempts == 4
    assert str(info.value) == "backoff of 8 s, more than the 3 s left before the run deadline (10 s)"


@pytest.mark.anyio
async def test_no_call_starts_after_the_run_deadline(clock: RecordingClock) -> None:
    service = Service()
    waits = WaitBudget(WaitLimits(run_deadline_s=10), clock)
    clock.t = 10.0
    with pytest.raises(WaitRefused, match=r"^the run deadline \(10 s\) has passed$"):
        await call_with_retry(
            service.attempt, classify, limiter=None, clock=clock, policy=RetryPolicy(), waits=waits
        )
    assert service.attempts == 0


def test_a_rate_limit_slot_is_not_waited_for_beyond_the_cap() -> None:
    clock = LoopClock()
    limiter = RateLimiter(1, 2, clock=clock)  # one request a minute

    async def main() -> float:
        waits = WaitBudget(WaitLimits(max_wait_s=10), clock)
        async with limiter.slot(waits):
            pass
        started = clock.now()
        with pytest.raises(WaitRefused, match=r"no rate-limit slot \(1 requests/min\) within 10 s"):
            async with limiter.slot(waits):
                pass
        return clock.now() - started

    assert run_virtual(main()) == pytest.approx(10.0)


@pytest.fixture
def slow_batches() -> Iterator[EmulatorHandle]:
    handle = start_emulator(batch_ready_s=3600)
    yield handle
    handle.stop()


@pytest.mark.anyio
async def test_batch_polling_stops_before_the_run_deadline(
    slow_batches: EmulatorHandle, cache: ResponseCache, clock: RecordingClock
) -> None:
    faults = FaultSettings(waits=WaitLimits(run_deadline_s=100))
    access = ApiAccess(FAKE_ANTHROPIC_KEY, slow_batches.base_url, clock=clock, faults=faults)
    reranker = ClaudeReranker("claude-haiku-4-5", access, cache, "rerank-test-1", poll_interval_s=30)
    candidates = [RerankCandidate(f"e{i}", f"E{i}", "s", 0.5) for i in range(3)]
    with pytest.raises(WaitRefused, match=r"in progress: next poll in 30 s, more than the 10 s left"):
        await reranker.rerank_batch([RerankRequest("q", candidates, SELECTION_K)])
    await reranker.aclose()
    assert clock.sleeps == [30.0, 30.0, 30.0]
    assert slow_batches.stats["requests"]["GET /v1/messages/batches"] == 3


def test_caps_are_validated_per_model(tmp_path: Path) -> None:
    models = tmp_path / "models.yaml"
    models.write_text(
        "models:\n  m:\n    embedder: {kind: local}\n    reranker: {kind: cosine}\n"
        "    waits: {max_wait_s: 30, run_deadline_s: 600}\n    breaker: {failures: 3}\n"
    )
    cfg = load_models(models)["m"]
    assert (cfg.waits.max_wait_s, cfg.waits.run_deadline_s, cfg.breaker.failures) == (30, 600, 3)
    assert cfg.breaker.cooldown_s == 60  # the default
    models.write_text(models.read_text().replace("failures: 3", "failures: 0"))
    with pytest.raises(ConfigError, match=r"model 'm': field 'breaker.failures': Input should be greater"):
        load_models(models)

"""One deadline per attempt, whatever arrives meanwhile: a call whose answer trickles in (every
read short) is cut at the client's `timeout_s`, or sooner when the run deadline is nearer. On a
virtual clock (the elapsed times are exact) and against real loopback services that stall after
their headers or drip their body (counted, never timed)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.contract import SystemRequest
from eval_pipeline.providers.api_base import ApiAccess, CallGuard
from eval_pipeline.providers.base import ProviderError, RerankCandidate
from eval_pipeline.providers.cache import ResponseCache
from eval_pipeline.providers.circuit import BreakerSettings
from eval_pipeline.providers.claude_rerank import ClaudeReranker
from eval_pipeline.providers.models import FaultSettings, WaitLimits
from eval_pipeline.providers.ratelimit import RetryPolicy
from eval_pipeline.providers.system_target import HttpTarget
from eval_pipeline.providers.voyage import VoyageEmbedder
from eval_pipeline.testing.hanging import Behaviour, HangingServer
from tests.providers.conftest import FAKE_ANTHROPIC_KEY, FAKE_VOYAGE_KEY, LoopClock, run_virtual
from tests.providers.fakes import classify

NO_BACKOFF = RetryPolicy(max_attempts=3, backoff_s=0.0, jitter_s=0.0)
# Enough failures in a row that the breaker stays out of these tests' way.
PATIENT = FaultSettings(breaker=BreakerSettings(failures=100))


class Trickle:
    """An answer arriving one short read at a time, for ever: no read waits longer than a
    second, so only a deadline over the whole attempt ends it."""

    def __init__(self) -> None:
        self.attempts = 0
        self.reads = 0

    async def attempt(self) -> str:
        self.attempts += 1
        while True:
            await asyncio.sleep(1.0)
            self.reads += 1


def _guard(url: str, timeout_s: float | None, faults: FaultSettings = PATIENT) -> CallGuard:
    return CallGuard(url, LoopClock(), NO_BACKOFF, faults, attempt_timeout_s=timeout_s)


def _trickled(trickle: Trickle, url: str, faults: FaultSettings = PATIENT) -> tuple[str, float]:
    """Why a call to `trickle` (5 s per attempt) failed, and how long it took, on virtual time."""

    async def main() -> tuple[str, float]:
        guard = _guard(url, timeout_s=5.0, faults=faults)  # its run deadline starts now
        started = asyncio.get_running_loop().time()
        with pytest.raises(ProviderError) as info:
            await guard.call(trickle.attempt, classify)
        return str(info.value), asyncio.get_running_loop().time() - started

    return run_virtual(main())


def test_a_trickling_answer_is_cut_at_the_timeout_of_each_attempt() -> None:
    trickle = Trickle()
    reason, elapsed = _trickled(trickle, "http://trickle.invalid/a")
    assert reason == "no complete answer within 5 s after 3 attempts"
    assert trickle.attempts == 3 and elapsed == pytest.approx(15.0)
    assert trickle.reads == 12  # four reads of a second each fit in each 5 s attempt


def test_no_attempt_runs_past_the_run_deadline() -> None:
    trickle = Trickle()
    faults = FaultSettings(waits=WaitLimits(run_deadline_s=7.0), breaker=PATIENT.breaker)
    reason, elapsed = _trickled(trickle, "http://trickle.invalid/b", faults)
    # The second attempt had 2 s of the run left; no third one started.
    assert reason == "the run deadline (7 s) has passed"
    assert trickle.attempts == 2 and elapsed == pytest.approx(7.0)


def test_an_attempt_that_answers_in_time_is_untouched() -> None:
    async def answer() -> str:
        await asyncio.sleep(4.0)
        return "ok"

    async def main() -> str:
        return await _guard("http://quick.invalid/c", timeout_s=5.0).call(answer, classify)

    assert run_virtual(main()) == "ok"


@pytest.mark.parametrize("behaviour", ["headers", "drip"])
def test_a_service_that_stalls_or_drips_after_its_headers_is_timed_out(behaviour: Behaviour) -> None:
    # Each byte of the drip comes well within the client's per-read timeout: only the attempt's
    # overall deadline can end it. Hang guard: the test's own timeout (pytest-timeout).
    request = SystemRequest(mechanism=Mechanism.STATE, message="m", user_type=None, user_state={})
    with HangingServer(behaviour, drip_s=0.05) as server:
        target = HttpTarget(ApiAccess(base_url=server.url, policy=NO_BACKOFF, timeout_s=0.5, faults=PATIENT))

        async def main() -> None:
            try:
                await target.ask(request)
            finally:
                await target.aclose()

        with pytest.raises(ProviderError, match=r"after 3 attempts$") as info:
            asyncio.run(main())
        assert server.requests == 3
    if behaviour == "drip":
        assert str(info.value) == "no complete answer within 0.5 s after 3 attempts"


def _voyage_embeds(url: str, cache: ResponseCache) -> Callable[[], Coroutine[Any, Any, object]]:
    access = ApiAccess(FAKE_VOYAGE_KEY, f"{url}/v1", policy=NO_BACKOFF, timeout_s=0.5, faults=PATIENT)
    embedder = VoyageEmbedder("voyage-3.5", access, cache)

    async def call() -> object:
        try:
            return await embedder.embed(["a text"], "document")
        finally:
            await embedder.aclose()

    return call


def _claude_reranks(url: str, cache: ResponseCache) -> Callable[[], Coroutine[Any, Any, object]]:
    access = ApiAccess(FAKE_ANTHROPIC_KEY, url, policy=NO_BACKOFF, timeout_s=0.5, faults=PATIENT)
    reranker = ClaudeReranker("claude-haiku-4-5", access, cache, "rerank-test-1")
    candidates = [RerankCandidate(f"e{i}", f"E{i}", "s", 0.5) for i in range(3)]

    async def call() -> object:
        try:
            return await reranker.rerank("q", candidates, 2)
        finally:
            await reranker.aclose()

    return call


@pytest.mark.parametrize("api", [_voyage_embeds, _claude_reranks], ids=["voyage", "anthropic"])
def test_every_api_call_is_timed_out_by_a_dripping_server(
    api: Callable[[str, ResponseCache], Callable[[], Coroutine[Any, Any, object]]], tmp_path: Path
) -> None:
    with HangingServer("drip", drip_s=0.05) as server:
        # The service's root: each SDK adds its own path.
        call = api(server.url.removesuffix("/retrieve"), ResponseCache(tmp_path / "cache", "use"))
        with pytest.raises(ProviderError, match=r"after 3 attempts$"):
            asyncio.run(call())
        assert server.requests == 3

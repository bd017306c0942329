"""Fixtures for the API provider tests: a loopback emulator per test, caches, clocks, entities.

Every API test drives the real SDK clients against `eval_pipeline.testing.emulator`; nothing
is monkeypatched except environment variables.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from eval_pipeline.core.inputs.kb import Entity, EntityType, LoadMode
from eval_pipeline.providers.cache import ResponseCache
from eval_pipeline.providers.ratelimit import RetryPolicy
from eval_pipeline.testing.emulator.server import EmulatorHandle, start_emulator

T = TypeVar("T")
FAKE_ANTHROPIC_KEY = "sk-ant-test-0000-not-a-real-key"
FAKE_VOYAGE_KEY = "pa-test-0000-not-a-real-key"
# Voyage embeddings and a Claude Haiku reranker, paced fast enough for a test against the emulator.
VOYAGE_HAIKU = {
    "embedder": {"kind": "voyage", "model_id": "voyage-3.5"},
    "reranker": {"kind": "claude", "model_id": "claude-haiku-4-5"},
    "rate_limit_per_min": 6000,
}
# Tests of `timeout` faults use a short client timeout, below the emulator's stall; the others a
# generous one, so a slow moment on a busy machine cannot turn into an extra (retried) call. The
# short one is still a second: at 0.3 s, on a machine loaded to 10-15, ordinary answers (a 500, a
# selection) timed out too and the fault tests failed. A stall lasts until the client gives up or
# the emulator stops (`pause` wakes then), so it can be long at no cost.
CLIENT_TIMEOUT_S = 1.0
STALL_S = 30.0
SAFE_TIMEOUT_S = 10.0


def point_sdks_at(emu: EmulatorHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both SDKs' keys and base URLs as a user sets them, aimed at the loopback emulator."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_ANTHROPIC_KEY)
    monkeypatch.setenv("VOYAGE_API_KEY", FAKE_VOYAGE_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emu.base_url)
    monkeypatch.setenv("VOYAGE_BASE_URL", emu.voyage_base_url)


class RecordingClock:
    """A clock whose sleeps take no real time: they advance `now()` and are recorded."""

    speed = 1.0

    def __init__(self) -> None:
        self.t = 0.0
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds
        await asyncio.sleep(0)


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock jumps to the next timer whenever nothing is ready to run, so
    timers (aiolimiter's refills, sleeps) cost no real time and a busy machine cannot stretch
    them: elapsed times measured on it are exact, not wall-clock. Each jump is at least one
    microsecond, as a real clock would tick: a timer scheduled a rounding error ahead (aiolimiter
    does this) would otherwise fire at the same instant forever."""

    def __init__(self) -> None:
        super().__init__()
        self._virtual_now = 0.0

    def time(self) -> float:
        return self._virtual_now

    def _run_once(self) -> None:
        ready, scheduled = self._ready, self._scheduled  # type: ignore[attr-defined]
        if not ready and scheduled:
            self._virtual_now = max(self._virtual_now + 1e-6, scheduled[0].when())
        super()._run_once()  # type: ignore[misc]


class LoopClock:
    """The `Clock` of the running event loop (with VirtualTimeLoop: virtual time)."""

    speed = 1.0

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def run_virtual(main: Coroutine[Any, Any, T]) -> T:
    loop = VirtualTimeLoop()
    try:
        return loop.run_until_complete(main)
    finally:
        loop.close()


@pytest.fixture
def anyio_backend() -> str:
    """Async tests run on asyncio (anyio's pytest plugin), like the pipeline."""
    return "asyncio"


@pytest.fixture(autouse=True)
def _loopback_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # Loopback must bypass any configured proxy, and a developer's real endpoints or keys in the
    # environment must never be picked up by these tests.
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    for name in ("ANTHROPIC_BASE_URL", "VOYAGE_BASE_URL", "ANTHROPIC_API_KEY", "VOYAGE_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def emulator() -> Iterator[EmulatorHandle]:
    handle = start_emulator(stall_s=STALL_S)
    yield handle
    handle.stop()


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[ResponseCache]:
    response_cache = ResponseCache(tmp_path / "cache", "use")
    yield response_cache
    response_cache.close()


@pytest.fixture
def clock() -> RecordingClock:
    return RecordingClock()


@pytest.fixture
def policy() -> RetryPolicy:
    return RetryPolicy(max_attempts=5, deadline_s=600.0)


def make_entities(n: int) -> list[Entity]:
    return [
        Entity(
            entity_id=f"topic_{i:03d}",
            entity_type=EntityType.KNOWLEDGE,
            load_mode=LoadMode.SEMANTIC,
            title=f"Topic {i}",
            summary=f"What to know about topic {i}.",
            content=f"Guidance for topic {i}: details, examples and next steps.",
        )
        for i in range(n)
    ]

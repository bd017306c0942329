"""VoyageEmbedder / VoyageReranker against the emulator through the real voyageai SDK."""

from __future__ import annotations

import numpy as np
import pytest

from eval_pipeline.providers.api_base import ApiAccess
from eval_pipeline.providers.base import ProviderError, RerankCandidate
from eval_pipeline.providers.cache import ResponseCache
from eval_pipeline.providers.ratelimit import Clock, RetryPolicy
from eval_pipeline.providers.voyage import (
    VoyageEmbedder,
    VoyageReranker,
    estimate_tokens,
    plan_batches,
)
from eval_pipeline.testing.emulator.config import hash_vector
from eval_pipeline.testing.emulator.server import EmulatorHandle, start_emulator
from tests.providers.conftest import (
    CLIENT_TIMEOUT_S,
    FAKE_VOYAGE_KEY,
    SAFE_TIMEOUT_S,
    STALL_S,
    RecordingClock,
)

pytestmark = pytest.mark.anyio


def _embedder(
    emu: EmulatorHandle,
    cache: ResponseCache,
    clock: Clock,
    timeout_s: float = SAFE_TIMEOUT_S,
    max_batch_tokens: int | None = None,
) -> VoyageEmbedder:
    access = ApiAccess(
        FAKE_VOYAGE_KEY, emu.voyage_base_url, clock=clock, policy=RetryPolicy(), timeout_s=timeout_s
    )
    return VoyageEmbedder("voyage-3.5", access, cache, max_batch_tokens)


def _reranker(emu: EmulatorHandle, cache: ResponseCache, clock: Clock) -> VoyageReranker:
    access = ApiAccess(FAKE_VOYAGE_KEY, emu.voyage_base_url, clock=clock, timeout_s=SAFE_TIMEOUT_S)
    return VoyageReranker("rerank-2.5", access, cache)


def test_plan_batches_respects_both_caps() -> None:
    texts = ["x" * 30] * 25  # 10 estimated tokens each
    assert [len(b) for b in plan_batches(texts, max_texts=10, max_tokens=10_000)] == [10, 10, 5]
    assert [len(b) for b in plan_batches(texts, max_texts=1000, max_tokens=45)] == [4] * 6 + [1]
    assert plan_batches(["y" * 999], max_texts=10, max_tokens=5) == [[0]]  # alone if oversized
    assert sum(map(len, plan_batches(texts, 7, 33))) == 25
    assert estimate_tokens("abcdefg") == 3


async def test_embeds_unit_vectors_with_usage(
    emulator: EmulatorHandle, cache: ResponseCache, clock: RecordingClock
) -> None:
    result = await _embedder(emulator, cache, clock).embed(["alpha", "beta", "alpha"], "document")
    assert result.vectors.shape == (3, 256) and result.vectors.dtype == np.float32
    np.testing.assert_allclose(result.vectors[0], hash_vector("alpha", 256), rtol=1e-6)
    np.testing.assert_allclose(result.vectors[0], result.vectors[2])
    assert result.api_calls == 1 and result.usage.input_tokens > 0
    assert emulator.counts.requests("/v1/embeddings")[0]["input_type"] == "document"


async def test_batches_stay_within_text_and_token_caps(
    emulator: EmulatorHandle, cache: ResponseCache, clock: RecordingClock
) -> None:
    texts = [f"text number {i}" for i in range(2300)]
    result = await _embedder(emulator, cache, clock).embed(texts, "document")
    assert result.vectors.shape[0] == 2300 and result.api_calls == 3
    assert sorted(b["texts"] for b in emulator.stats["embed_batches"]) == [300, 1000, 1000]

    emulator.reset()
    small = _embedder(emulator, cache, clock, max_batch_tokens=50)
    texts = [f"{i:02d}".rjust(24, "x") for i in range(40)]  # 8 estimated tokens each
    result = await small.embed(texts, "query")
    assert result.api_calls == 7
    assert all(b["texts"] <= 6 for b in emulator.stats["embed_batches"])


async def test_warm_cache_makes_no_calls(
    emulator: EmulatorHandle, cache: ResponseCache, clock: RecordingClock
) -> None:
    embedder = _embedder(emulator, cache, clock)
    cold = await embedder.embed(["a", "b", "c"], "query")
    warm = await embedder.embed(["c", "a", "b"], "query")
    assert emulator.stats["requests"] == {"POST /v1/embeddings": 1}
    assert warm.api_calls == 0 and warm.cache_hits == 3 and warm.usage.input_tokens == 0
    np.testing.assert_allclose(warm.vectors[1], cold.vectors[0])
    mixed = await embedder.embed(["a", "new"], "query")
    assert mixed.api_calls == 1 and mixed.cache_hits == 1
    assert emulator.counts.requests("/v1/embeddings")[-1]["input"] == ["new"]
    other_type = await embedder.embed(["a"], "document")  # input type is part of the key
    assert other_type.api_calls == 1


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("500", "HTTP 500 after 5 attempts"),
        ("529", "malformed response after 5 attempts"),  # voyageai reads a 529 as a success
        ("429", "HTTP 429 after 5 attempts"),
        # Five timeouts in a row are the breaker's default: the service is declared down.
        ("timeout", "service down: {url} (5 calls in a row unreachable)"),
        ("malformed", "malformed response after 5 attempts"),
        # Connected, then the reply broke off: retried, never counted as the service being down.
        ("cut_short", "reply cut short after 5 attempts"),
        ("drop", "connection dropped after 5 attempts"),
    ],
)
async def test_each_fault_kind_is_retried_then_reported(
    fault: str, reason: str, cache: ResponseCache, clock: RecordingClock
) -> None:
    with start_emulator(fault_rate=1.0, faults=(fault,), stall_s=STALL_S) as emu:
        with pytest.raises(ProviderError) as info:
            await _embedder(emu, cache, clock, CLIENT_TIMEOUT_S).embed(["q"], "query")
        assert emu.stats["requests"]["POST /v1/embeddings"] == 5
    assert str(info.value) == reason.format(url=emu.voyage_base_url)
    assert FAKE_VOYAGE_KEY not in str(info.value)
    if fault == "429":  # the emulator sends retry-after: 1; jitter adds at most 1 s
        # …but never sooner than the backoff: max(1, 1·2^k) + jitter.
        assert len(clock.sleeps) == 4
        assert all(2.0**k <= s <= 2.0**k + 1.0 for k, s in enumerate(clock.sleeps))


async def test_transient_faults_recover(cache: ResponseCache, clock: RecordingClock) -> None:
    with start_emulator(fault_rate=0.3, faults=("500", "429"), seed=3) as emu:
        embedder = _embedder(emu, cache, clock)
        results = [await embedder.embed([f"query {i}"], "query") for i in range(12)]
        stats = emu.stats
    assert all(r.vectors.shape == (1, 256) for r in results)
    assert stats["statuses"]["200"] == 12 and sum(stats["faults"].values()) > 0


async def test_bad_request_is_not_retried(cache: ResponseCache, clock: RecordingClock) -> None:
    with start_emulator(embed_max_tokens=5) as emu:  # the emulator's cap below ours
        with pytest.raises(ProviderError, match=r"^HTTP 400: at most 5 tokens$"):
            await _embedder(emu, cache, clock).embed(["a text of more than 20 characters"], "query")
        assert emu.stats["total_requests"] == 1


def _candidates(n: int) -> list[RerankCandidate]:
    return [RerankCandidate(f"e{i}", f"Title {i}", f"Summary {i}", 0.5) for i in range(n)]


async def test_rerank_returns_relevance_order_and_caches(
    emulator: EmulatorHandle, cache: ResponseCache, clock: RecordingClock
) -> None:
    reranker = _reranker(emulator, cache, clock)
    candidates = _candidates(15)
    result = await reranker.rerank("Title 7: Summary 7", candidates, 6)
    assert len(result.selections) == 6 and result.selections[0].entity_id == "e7"
    assert [s.rank for s in result.selections] == [1, 2, 3, 4, 5, 6]
    assert (result.selections[0].reason or "").startswith("relevance ")
    assert result.api_calls == 1 and result.usage.input_tokens > 0
    sent = emulator.counts.requests("/v1/rerank")[0]
    assert sent["documents"][3] == "Title 3: Summary 3" and sent["top_k"] == 6
    again = await reranker.rerank("Title 7: Summary 7", candidates, 6)
    assert again.selections == result.selections and again.cache_hits == 1
    assert emulator.stats["requests"]["POST /v1/rerank"] == 1
    await reranker.rerank("Title 7: Summary 7", candidates, 6, trial=1)  # a new trial calls
    assert emulator.stats["requests"]["POST /v1/rerank"] == 2


@pytest.mark.parametrize(
    ("bad", "reason", "calls"),
    [
        ("repeated", "voyage rerank answer is malformed: index 1 is out of range or repeated", 1),
        ("out_of_range", "malformed response after 5 attempts", 5),  # the SDK itself chokes on it
    ],
)
async def test_a_wrong_rerank_answer_errors_and_is_never_cached(
    bad: str, reason: str, calls: int, cache: ResponseCache, clock: RecordingClock
) -> None:
    with start_emulator(rerank_bad_answer=bad) as emulator:
        reranker = _reranker(emulator, cache, clock)
        for _ in range(2):
            with pytest.raises(ProviderError) as caught:
                await reranker.rerank("Title 1: Summary 1", _candidates(6), 6)
            assert str(caught.value).startswith(reason)
        # Asked again, not replayed: a bad answer never reaches the cache.
        assert emulator.stats["requests"]["POST /v1/rerank"] == 2 * calls
    if bad == "repeated":  # parsed, so the call was billed and is counted
        assert caught.value.api_calls == 1 and caught.value.usage.input_tokens > 0

"""A run's queries through an API embedder: embedded up front in batches within the provider's
caps (real voyageai SDK, loopback emulator), their usage shared out among the tests, the store
and response cache making a warm rerun free, a failed batch retried."""

from __future__ import annotations

import asyncio
import math
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from eval_pipeline.core.mechanisms.retrieval import SemanticRetrieval, Usage
from eval_pipeline.providers.api_base import ApiAccess
from eval_pipeline.providers.cache import EmbeddingStore, ResponseCache
from eval_pipeline.providers.local_rerank import CosineReranker
from eval_pipeline.providers.pricing import Price, cost_usd
from eval_pipeline.providers.ratelimit import RateLimiter, RetryPolicy
from eval_pipeline.providers.semantic_pipeline import SemanticPipeline, _Index, _share
from eval_pipeline.providers.target import RetrievalItem
from eval_pipeline.providers.voyage import MAX_TEXTS_PER_REQUEST, VoyageEmbedder
from eval_pipeline.testing.emulator.server import EmulatorHandle, start_emulator
from tests.providers.conftest import FAKE_VOYAGE_KEY, SAFE_TIMEOUT_S, RecordingClock, make_entities

PRICE = Price(input=0.06)
QUERIES = 2 * MAX_TEXTS_PER_REQUEST + 300  # three requests' worth
# A token cap that holds about 130 of these queries (~9 estimated tokens each): three requests
# from 300 queries, for the tests about what happens to batches rather than about their size.
SMALL_CAP = 1200


def _pipeline(
    emu: EmulatorHandle,
    tmp_path: Path,
    limiter: RateLimiter | None = None,
    max_batch_tokens: int | None = None,
) -> SemanticPipeline:
    access = ApiAccess(
        FAKE_VOYAGE_KEY,
        emu.voyage_base_url,
        limiter,
        # Virtual time: a call's retry deadline counts its waits, never a stall of a busy machine.
        RecordingClock(),
        RetryPolicy(backoff_s=0),
        SAFE_TIMEOUT_S,
    )
    cache = ResponseCache(tmp_path / "responses", "use")
    embedder = VoyageEmbedder("voyage-3.5", access, cache, max_batch_tokens)
    store = EmbeddingStore(tmp_path / "store", "use")
    embed_cost = partial(cost_usd, price=PRICE)
    return SemanticPipeline(
        "m", embedder, CosineReranker(), store, 4, embed_cost=embed_cost, batch_queries=True
    )


def _run(pipeline: SemanticPipeline, queries: list[str]) -> list[SemanticRetrieval]:
    async def go() -> list[SemanticRetrieval]:
        await pipeline.prepare(make_entities(20))
        items = [RetrievalItem(f"t{i}", q) for i, q in enumerate(queries)]
        return await pipeline.retrieve_many(items)

    return asyncio.run(go())


def _queries(n: int, prefix: str = "question") -> list[str]:
    return [f"{prefix} {i} about topic {i % 20}" for i in range(n)]


def _query_batches(emu: EmulatorHandle) -> list[int]:
    """The number of texts in each query request the emulator received (faulted ones too)."""
    return [len(r["input"]) for r in emu.counts.requests("/v1/embeddings") if r["input_type"] == "query"]


def test_n_queries_take_ceil_n_over_the_cap_calls_and_the_tests_add_up_to_them(tmp_path: Path) -> None:
    with start_emulator() as emu:
        results = _run(_pipeline(emu, tmp_path), _queries(QUERIES))
        batches = _query_batches(emu)
        tokens = sum(b["tokens"] for b in emu.stats["embed_batches"][1:])  # the first indexed the KB
    assert len(batches) == math.ceil(QUERIES / MAX_TEXTS_PER_REQUEST) == 3
    assert sorted(batches) == [300, 1000, 1000]
    assert all(r.status == "ok" and len(r.candidates) == 15 for r in results)
    assert sum(r.usage.input_tokens for r in results) == tokens  # shared out, nothing lost
    assert sum(r.api_calls for r in results) == 3
    assert sum(r.cost_usd for r in results) == pytest.approx(tokens * 0.06 / 1e6)


def test_a_warm_rerun_is_free_and_new_queries_alone_are_sent(tmp_path: Path) -> None:
    with start_emulator() as emu:
        _run(_pipeline(emu, tmp_path), _queries(50))
        emu.reset()
        warm = _run(_pipeline(emu, tmp_path), _queries(50))
        assert emu.stats["total_requests"] == 0
        assert all(r.cache_hits == 1 and r.api_calls == 0 and r.cost_usd == 0 for r in warm)
        mixed = _run(_pipeline(emu, tmp_path), _queries(50) + _queries(7, "fresh"))
        sent = [r["input"] for r in emu.counts.requests("/v1/embeddings")]
    assert sent == [_queries(7, "fresh")]  # one call holding only the missing texts
    assert sum(r.api_calls for r in mixed) == 1 and sum(r.cache_hits for r in mixed) == 50


def test_a_fault_in_one_batch_is_retried_and_every_test_succeeds(tmp_path: Path) -> None:
    # Request 1 indexes the KB; requests 2-4 are the three query batches (sent at once): the
    # second to arrive fails once and is sent again.
    with start_emulator(fault_at=(("/v1/embeddings", 3, "500"),)) as emu:
        results = _run(_pipeline(emu, tmp_path, max_batch_tokens=SMALL_CAP), _queries(300))
        batches = _query_batches(emu)
        assert len(batches) == 4 and sorted(set(batches)) == [33, 133, 134]  # one of them twice
        assert emu.stats["faults"] == {"500": 1}
        assert emu.stats["requests"]["POST /v1/embeddings"] == 1 + 3 + 1
    assert all(r.status == "ok" for r in results)


def test_each_batch_is_one_request_against_the_rate_limit(tmp_path: Path) -> None:
    limiter = RateLimiter(requests_per_min=6000, concurrency=4)
    with start_emulator(rpm=5) as emu:  # more than 5 requests in a minute would be refused (429)
        results = _run(_pipeline(emu, tmp_path, limiter, SMALL_CAP), _queries(300))
        assert emu.stats["total_requests"] == 4 and "429" not in emu.stats["statuses"]
    assert all(r.status == "ok" for r in results)


def test_usage_is_shared_in_whole_tokens_that_add_up() -> None:
    bills = _share(Usage(input_tokens=10), 2, [1, 1, 1, 7])
    parts = [b[0].input_tokens if b else 0 for b in bills]
    assert sum(parts) == 10 and parts[3] == 7
    assert [b[1] if b else 0 for b in bills] == [1, 1, 0, 0]
    assert _share(Usage(), 0, [3, 4]) == [None, None]


def test_a_query_ranks_the_same_alone_as_in_a_batch() -> None:
    # BLAS rounds a lone row (matrix-vector) differently from a block (matrix-matrix), and a
    # block's rows differently with its size and thread count: under the numeric contract a
    # test's candidates and their scores never depend on who ran with it.
    rng = np.random.default_rng(5)
    matrix = rng.standard_normal((700, 64)).astype(np.float32)
    queries = rng.standard_normal((9, 64)).astype(np.float32)
    index = _Index(make_entities(700), matrix)
    batch = index.top_many(queries, 15)
    assert [index.top(q, 15) for q in queries] == batch
    assert index.top_many(queries[3:5], 15) == batch[3:5]

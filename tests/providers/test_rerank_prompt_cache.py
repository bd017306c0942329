"""The Claude reranker's cached KB prefix and batch reranking, against the emulator's per-model
minimum cacheable prefixes, through the real anthropic SDK.

Haiku 4.5 caches a prefix only from 4096 tokens. The sample KB's catalogue makes a prefix of
about 3,300 (emulator) tokens: below, so nothing is cached and the run says so. The same KB
with generated entities added is above: call 1 writes the prefix (alone), calls 2..n read it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from functools import cache, partial
from pathlib import Path
from typing import NamedTuple

import pytest
from voyageai.client_async import AsyncClient as VoyageClient

from eval_pipeline.core.inputs.banks import SemanticTest
from eval_pipeline.core.inputs.kb import Entity
from eval_pipeline.core.inputs.validation import load_validated
from eval_pipeline.core.mechanisms.retrieval import SemanticRetrieval, Usage
from eval_pipeline.providers import anthropic_client
from eval_pipeline.providers.api_base import ApiAccess
from eval_pipeline.providers.cache import EmbeddingStore, ResponseCache
from eval_pipeline.providers.claude_rerank import ClaudeReranker
from eval_pipeline.providers.pricing import BUILTIN_PRICES, Price, cost_usd
from eval_pipeline.providers.prompt_cache import PromptCacheStatus
from eval_pipeline.providers.ratelimit import RateLimiter
from eval_pipeline.providers.semantic_pipeline import SemanticPipeline
from eval_pipeline.providers.target import PrepareReport, RetrievalItem, retrieval_items
from eval_pipeline.providers.voyage import VoyageEmbedder
from eval_pipeline.testing.emulator.server import EmulatorHandle, start_emulator
from tests.conftest import REPO, TENANT
from tests.providers.conftest import (
    FAKE_ANTHROPIC_KEY,
    FAKE_VOYAGE_KEY,
    SAFE_TIMEOUT_S,
    STALL_S,
    RecordingClock,
    make_entities,
)

pytestmark = pytest.mark.anyio

HAIKU = "claude-haiku-4-5"
SONNET = "claude-sonnet-4-5"
VOYAGE = BUILTIN_PRICES["voyage-3.5"]


@cache
def _domain(kb: Path, banks: Path) -> tuple[tuple[Entity, ...], tuple[SemanticTest, ...]]:
    loaded_kb, loaded = load_validated(kb, banks)
    assert loaded.semantic is not None
    return tuple(loaded_kb.entities), tuple(loaded.semantic.tests)


def sample() -> tuple[list[Entity], list[RetrievalItem]]:
    entities, tests = _domain(REPO / "kb", REPO / "test_banks")
    return list(entities), retrieval_items(tests, 1)


def tenant() -> tuple[list[Entity], list[RetrievalItem]]:
    entities, tests = _domain(TENANT / "kb.yaml", TENANT / "banks")
    return list(entities), retrieval_items(tests, 1)


def grown(entities: list[Entity], extra: int) -> list[Entity]:
    """The KB plus `extra` generated SEMANTIC entities: a larger catalogue."""
    return entities + make_entities(extra)


Make = Callable[..., SemanticPipeline]


@asynccontextmanager
async def _pipelines(emulator: EmulatorHandle, tmp_path: Path) -> AsyncIterator[Make]:
    """Pipelines (Voyage embeddings and a Claude reranker, both on the emulator), each with its
    own caches."""
    rerankers: list[ClaudeReranker] = []
    caches: list[ResponseCache] = []

    def factory(model: str = HAIKU, batch: bool = False, cache_dir: Path | None = None) -> SemanticPipeline:
        clock = RecordingClock()
        where = cache_dir or tmp_path / f"cache{len(caches)}"
        response_cache = ResponseCache(where, "use")
        caches.append(response_cache)
        price = BUILTIN_PRICES[model]
        limiter = RateLimiter(60_000, 8, clock=clock)
        access = ApiAccess(FAKE_ANTHROPIC_KEY, emulator.base_url, limiter, timeout_s=SAFE_TIMEOUT_S)
        reranker = ClaudeReranker(model, access, response_cache, "rerank-v2")
        rerankers.append(reranker)
        voyage = ApiAccess(FAKE_VOYAGE_KEY, emulator.voyage_base_url, clock=clock)
        embedder = VoyageEmbedder("voyage-3.5", voyage, response_cache)
        return SemanticPipeline(
            "api-test",
            embedder,
            reranker,
            EmbeddingStore(where),
            4,
            embed_cost=partial(cost_usd, price=VOYAGE),
            rerank_cost=partial(cost_usd, price=price),
            batch=batch,
        )

    yield factory
    for reranker in rerankers:
        await reranker.aclose()
    for response_cache in caches:
        response_cache.close()


@pytest.fixture
async def make(emulator: EmulatorHandle, tmp_path: Path) -> AsyncIterator[Make]:
    async with _pipelines(emulator, tmp_path) as factory:
        yield factory


async def _run(
    pipeline: SemanticPipeline, entities: list[Entity], items: list[RetrievalItem]
) -> tuple[PrepareReport, list[SemanticRetrieval]]:
    prepared = await pipeline.prepare(entities)
    return prepared, await pipeline.retrieve_many(items)


class Online(NamedTuple):
    """Haiku's online run of a catalogue, from a fresh emulator state."""

    prepared: PrepareReport
    results: list[SemanticRetrieval]
    rerank_requests: int  # what the emulator received on /v1/messages


@pytest.fixture(scope="module")
def online(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, Online]]:
    """The sample KB's online runs with 0 and with 100 generated entities (below and above Haiku's
    minimum), made once: several tests compare a run of their own (Sonnet, batch) with them."""
    entities, items = sample()

    async def both(emulator: EmulatorHandle) -> dict[int, Online]:
        made = {}
        async with _pipelines(emulator, tmp_path_factory.mktemp("online")) as make:
            for extra in (0, 100):
                emulator.reset()  # a fresh prompt cache and fresh counts
                prepared, results = await _run(make(), grown(entities, extra), items)
                made[extra] = Online(prepared, results, emulator.stats["requests"]["POST /v1/messages"])
        return made

    emulator = start_emulator(stall_s=STALL_S)
    try:
        yield asyncio.run(both(emulator))
    finally:
        emulator.stop()


async def _embedding_tokens(emulator: EmulatorHandle, items: list[RetrievalItem]) -> int:
    """A retrieval's input tokens include its query's embedding (Voyage, $0.06 per MTok, always
    online): counted by embedding the queries again."""
    client = VoyageClient(api_key=FAKE_VOYAGE_KEY, base_url=emulator.voyage_base_url)
    embedded = await client.embed([i.query for i in items], model="voyage-3.5", input_type="query")
    return int(embedded.total_tokens)


async def _priced(
    emulator: EmulatorHandle,
    items: list[RetrievalItem],
    results: list[SemanticRetrieval],
    price: Price,
    write_rate: float,
) -> float:
    """The runs' summed usage priced by hand from the table's rates."""
    embedded = await _embedding_tokens(emulator, items)
    total = sum((r.usage for r in results), Usage())
    return (
        embedded * 0.06
        + (total.input_tokens - embedded) * price.input
        + total.output_tokens * (price.output or 0)
        + total.cache_creation_input_tokens * write_rate
        + total.cache_read_input_tokens * (price.cache_read or 0)
    ) / 1e6


async def test_a_catalogue_above_haikus_minimum_is_read_on_calls_2_to_n(
    online: dict[int, Online], emulator: EmulatorHandle
) -> None:
    _, items = sample()
    prepared, results, rerank_requests = online[100]
    status = prepared.prompt_cache
    assert status is not None and status.minimum == 4096 and status.used
    assert status.prefix_tokens is not None
    assert status.note.startswith(f"prompt cache used: prefix {status.prefix_tokens} tokens >= minimum 4096")
    assert all(r.status == "ok" for r in results) and len(results) == 94
    writes = [r.usage.cache_creation_input_tokens for r in results if r.usage.cache_creation_input_tokens]
    reads = [r.usage.cache_read_input_tokens for r in results if r.usage.cache_read_input_tokens]
    (prefix,) = writes  # call 1 wrote the prefix once ...
    assert reads == [prefix] * 93  # ... and calls 2..94 each read all of it
    assert abs(prefix - status.prefix_tokens) <= 1  # the counted size is what the API caches
    # Cost: Haiku 4.5 at $1 input, $5 output, $1.25 5-minute writes, $0.10 reads per MTok.
    assert rerank_requests == 94
    haiku = Price(input=1.0, output=5.0, cache_write=1.25, cache_read=0.1)
    assert sum(r.cost_usd for r in results) == pytest.approx(
        await _priced(emulator, items, results, haiku, 1.25), rel=1e-12
    )


async def test_the_sample_kb_is_below_haikus_minimum_and_the_run_says_so(
    make: Make, online: dict[int, Online], emulator: EmulatorHandle
) -> None:
    entities, items = sample()
    prepared, results, _ = online[0]
    status = prepared.prompt_cache
    assert status is not None and status.prefix_tokens is not None
    assert not status.used and 3000 < status.prefix_tokens < 4096
    assert status.note == (
        f"prompt cache not used: prefix {status.prefix_tokens} tokens < minimum 4096 for {HAIKU}"
    )
    assert all(r.usage.cache_creation_input_tokens == r.usage.cache_read_input_tokens == 0 for r in results)
    haiku = Price(input=1.0, output=5.0)
    assert sum(r.cost_usd for r in results) == pytest.approx(
        await _priced(emulator, items, results, haiku, 0.0), rel=1e-12
    )
    # The same catalogue clears Sonnet 4.5's 1024-token minimum.
    sonnet, _ = await _run(make(SONNET), entities, items[:3])
    assert sonnet.prompt_cache is not None and sonnet.prompt_cache.used
    assert sonnet.prompt_cache.minimum == 1024


async def test_a_tiny_kb_in_another_domain_is_below_the_minimum(make: Make) -> None:
    entities, items = tenant()
    prepared, results = await _run(make(), entities, items)
    assert prepared.prompt_cache is not None and not prepared.prompt_cache.used
    assert results and all(r.status == "ok" for r in results)
    assert sum(r.usage.cache_read_input_tokens + r.usage.cache_creation_input_tokens for r in results) == 0


@pytest.mark.parametrize("domain", [sample, tenant], ids=["sample", "tenant"])
async def test_below_the_minimum_no_call_waits_for_a_first_one(
    make: Make, emulator: EmulatorHandle, domain: Callable[[], tuple[list[Entity], list[RetrievalItem]]]
) -> None:
    """A prefix below the minimum is never written, so the first call has nothing to write for
    the others: the pipeline's first 4 rerank requests (its concurrency) are in flight at once.
    The emulator holds each until all 4 have come, and fails it with 400 if they do not."""
    entities, items = domain()
    emulator.reconfigure(gather=("/v1/messages", 4), barrier_timeout_s=10.0)
    prepared, results = await _run(make(), entities, items)
    assert prepared.prompt_cache is not None and prepared.prompt_cache.below_minimum
    assert len(results) >= 4 and all(r.status == "ok" for r in results), [r.error for r in results]


def test_only_a_counted_prefix_under_a_known_minimum_is_below_it() -> None:
    def status(tokens: int | None, minimum: int | None) -> PromptCacheStatus:
        return PromptCacheStatus(model_id=HAIKU, prefix_tokens=tokens, minimum=minimum)

    assert status(4095, 4096).below_minimum and not status(4096, 4096).below_minimum
    assert not status(None, 4096).below_minimum  # the count failed: it may be cached
    assert not status(100, None).below_minimum  # a model the table does not know


@pytest.mark.parametrize("extra", [0, 100], ids=["below-minimum", "above-minimum"])
async def test_batch_gives_the_online_selections_at_half_the_price(
    make: Make, online: dict[int, Online], emulator: EmulatorHandle, tmp_path: Path, extra: int
) -> None:
    entities, items = sample()
    kb = grown(entities, extra)
    online_results = online[extra].results  # made on an emulator of their own
    emulator.reconfigure(batch_ready_s=0.2)  # polled until it ends
    _, batched = await _run(make(batch=True, cache_dir=tmp_path / "batch"), kb, items)
    assert [r.selected_ids for r in batched] == [r.selected_ids for r in online_results]
    assert all(r.status == "ok" and r.api_calls == 2 for r in batched)  # an embedding, a rerank
    (sent,) = emulator.counts.requests("/v1/messages/batches")
    assert len(sent["requests"]) == 94 and "POST /v1/messages" not in emulator.stats["requests"]
    assert {r["params"]["system"][-1]["cache_control"]["ttl"] for r in sent["requests"]} == {"1h"}

    online_usage = sum((r.usage for r in online_results), Usage())
    batch_usage = sum((r.usage for r in batched), Usage())
    embedding = await _embedding_tokens(emulator, items) * 0.06 / 1e6
    online_cost = sum(r.cost_usd for r in online_results) - embedding
    batch_cost = sum(r.cost_usd for r in batched) - embedding
    if extra == 0:  # nothing cached: the same tokens, at exactly half the price
        assert batch_usage == online_usage and batch_usage.cache_creation_input_tokens == 0
        assert batch_cost == pytest.approx(online_cost / 2, rel=1e-12)
    else:  # the same tokens, but the one prefix write is at the 1-hour rate ($2 vs $1.25 per MTok)
        prefix = batch_usage.cache_creation_1h_input_tokens
        assert prefix == online_usage.cache_creation_input_tokens > 4096
        assert batch_usage == online_usage.model_copy(update={"cache_creation_1h_input_tokens": prefix})
        assert batch_cost == pytest.approx((online_cost + prefix * (2.0 - 1.25) / 1e6) / 2, rel=1e-12)

    # The batch's answers went into the response cache under the online keys: a rerun is free.
    _, again = await _run(make(batch=True, cache_dir=tmp_path / "batch"), kb, items)
    assert [r.selected_ids for r in again] == [r.selected_ids for r in online_results]
    assert sum(r.cost_usd for r in again) == 0
    assert all((r.api_calls, r.cache_hits) == (0, 2) for r in again)  # query vector, answer
    assert len(emulator.counts.requests("/v1/messages/batches")) == 1


async def test_batch_requests_that_error_are_answered_online(make: Make, emulator: EmulatorHandle) -> None:
    entities, items = tenant()
    _, online = await _run(make(), entities, items)
    emulator.reset()
    emulator.reconfigure(fault_rate=0.5, faults=("500",), seed=4)
    _, batched = await _run(make(batch=True), entities, items)
    assert [r.selected_ids for r in batched] == [r.selected_ids for r in online]
    assert all(r.status == "ok" for r in batched)
    (sent,) = emulator.counts.requests("/v1/messages/batches")
    retried = emulator.stats["statuses"].get("POST /v1/messages 200", 0)
    assert 0 < retried < len(sent["requests"])  # only the errored ones went online


async def test_more_requests_than_a_batch_holds_go_out_as_several_batches(
    make: Make, emulator: EmulatorHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    entities, items = tenant()
    _, online = await _run(make(), entities, items)
    emulator.reset()
    monkeypatch.setattr(anthropic_client, "MAX_BATCH_REQUESTS", 3)  # the API's cap is 10,000
    _, batched = await _run(make(batch=True), entities, items)
    assert [r.selected_ids for r in batched] == [r.selected_ids for r in online]
    sizes = [len(b["requests"]) for b in emulator.counts.requests("/v1/messages/batches")]
    assert sizes == [3, 3, len(items) - 6]


async def test_a_failing_token_count_leaves_the_cache_status_unknown_and_every_test_answered(
    make: Make, emulator: EmulatorHandle
) -> None:
    # The count only informs: an outage of count_tokens, or a gateway without it, must not
    # error tests the reranker can answer.
    emulator.reconfigure(fault_rate=1.0, faults=("500",), fault_routes=("/v1/messages/count_tokens",))
    entities, items = tenant()
    prepared, results = await _run(make(), entities, items)
    status = prepared.prompt_cache
    assert status is not None and status.prefix_tokens is None and not status.used
    assert status.note.startswith("prompt cache unknown: the prefix could not be counted (")
    assert FAKE_ANTHROPIC_KEY not in status.note
    assert [r.status for r in results] == ["ok"] * len(items)
    assert emulator.stats["faults"]["500"] >= 1  # the count was tried, and every try failed
    assert emulator.stats["requests"]["POST /v1/messages"] == len(items)

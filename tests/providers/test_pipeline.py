"""The semantic pipeline: 15 candidates then 6 selections, order, cost, errors as outcomes."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from eval_pipeline.core.inputs.kb import Entity, EntityType, LoadMode
from eval_pipeline.core.inputs.stage_depths import CANDIDATE_K, SELECTION_K
from eval_pipeline.core.mechanisms.retrieval import Selection, SemanticRetrieval, Usage
from eval_pipeline.providers.base import (
    EmbedResult,
    InputType,
    ProviderError,
    RerankCandidate,
    RerankResult,
)
from eval_pipeline.providers.cache import EmbeddingStore, ResponseCache
from eval_pipeline.providers.factory import build_pipeline
from eval_pipeline.providers.local_embedder import LocalMiniLMEmbedder
from eval_pipeline.providers.local_rerank import CosineReranker
from eval_pipeline.providers.models import ConfigError, ModelConfig
from eval_pipeline.providers.pricing import Price, cost_usd
from eval_pipeline.providers.semantic_pipeline import SemanticPipeline
from eval_pipeline.providers.target import RetrievalItem

TOPICS = {
    "gray_rock": ("Gray rock method", "Staying unreactive and boring with a high-conflict ex"),
    "biff_response": ("BIFF responses", "Brief, informative, friendly, firm replies to hostility"),
    "documentation_practices": ("Documentation", "Keeping dated records of incidents"),
    "boundary_setting": ("Boundary setting", "Setting and holding limits with a co-parent"),
    "loyalty_binds": ("Loyalty binds", "Children feeling caught between two parents"),
    "gatekeeping": ("Gatekeeping", "One parent restricting the other's access to the children"),
    "parental_alienation": ("Parental alienation", "A child rejecting a parent without cause"),
    "holiday_schedules": ("Holiday schedules", "Splitting birthdays and holidays fairly"),
    "handoff_conflict": ("Exchange conflict", "Calm, safe handoffs between homes"),
    "new_partner": ("New partners", "Introducing a new partner to the children"),
    "school_communication": ("School contact", "Both parents dealing with teachers"),
    "teen_refusal": ("Teen refusing visits", "A teenager who will not go to the other home"),
    "bedtime_routines": ("Bedtime routines", "Consistent sleep across two households"),
    "medical_decisions": ("Medical decisions", "Agreeing on doctors and treatment"),
    "child_support": ("Child support", "Talking about money without fighting"),
    "mediation": ("Mediation", "Using a mediator to settle disagreements"),
    "parallel_parenting": ("Parallel parenting", "Minimal contact parenting for high conflict"),
    "self_care": ("Self-care", "Looking after yourself during a custody dispute"),
    "court_preparation": ("Court preparation", "Getting ready for a custody hearing"),
    "sibling_rivalry": ("Siblings", "Brothers and sisters fighting after the separation"),
}


def entity(entity_id: str, mode: LoadMode = LoadMode.SEMANTIC) -> Entity:
    title, summary = TOPICS.get(entity_id, ("Persona", "How the assistant speaks"))
    return Entity(
        entity_id=entity_id,
        entity_type=EntityType.KNOWLEDGE if mode is LoadMode.SEMANTIC else EntityType.PERSONA,
        load_mode=mode,
        title=title,
        summary=summary,
        content=f"{title}. {summary}.",
    )


KB = [entity(e) for e in TOPICS] + [entity("assistant_persona", LoadMode.ALWAYS)]


class QueryFailingEmbedder:
    """Embeds documents with the local model; every query fails like an exhausted API call."""

    name = "query-failing"

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.inner = LocalMiniLMEmbedder()

    async def embed(self, texts: Sequence[str], input_type: InputType) -> EmbedResult:
        if input_type == "query":
            raise self.error
        return await self.inner.embed(texts, input_type)


class BilledEmbedder:
    """Reports API usage: 10 tokens per text, one call per request."""

    name = "billed"

    def __init__(self) -> None:
        self.inner = LocalMiniLMEmbedder()

    async def embed(self, texts: Sequence[str], input_type: InputType) -> EmbedResult:
        vectors = (await self.inner.embed(texts, input_type)).vectors
        return EmbedResult(vectors, Usage(input_tokens=10 * len(texts)), api_calls=1)


class StubReranker:
    """Returns canned selections (or raises) so the pipeline's checks can be exercised."""

    name = "stub"

    def __init__(self, picks: list[str] | None = None, error: Exception | None = None) -> None:
        self.picks, self.error = picks or [], error
        self.trials: list[int] = []

    async def rerank(
        self, query: str, candidates: Sequence[RerankCandidate], top_k: int, trial: int = 0
    ) -> RerankResult:
        self.trials.append(trial)
        if self.error is not None:
            raise self.error
        selections = [Selection(entity_id=e, rank=i) for i, e in enumerate(self.picks, 1)]
        return RerankResult(selections, Usage(input_tokens=1000, output_tokens=100), api_calls=1)


def run_one(pipeline: SemanticPipeline, query: str, trial: int = 0) -> SemanticRetrieval:
    async def go() -> SemanticRetrieval:
        await pipeline.prepare(KB)
        return await pipeline.retrieve("t1", query, trial)

    return asyncio.run(go())


def local(store: EmbeddingStore | None = None) -> SemanticPipeline:
    return SemanticPipeline("local-minilm", LocalMiniLMEmbedder(), CosineReranker(), store, 4)


def test_fifteen_candidates_then_six_selections_in_order() -> None:
    result = run_one(local(), "My ex keeps sending hostile texts, how do I reply?")
    assert result.status == "ok" and result.error is None
    assert len(result.candidates) == CANDIDATE_K and len(result.selections) == SELECTION_K
    scores = [c.score for c in result.candidates]
    assert scores == sorted(scores, reverse=True)
    assert result.selected_ids == result.candidate_ids[:SELECTION_K]
    assert "biff_response" in result.selected_ids
    assert "assistant_persona" not in result.candidate_ids
    assert (result.api_calls, result.cost_usd, result.model) == (0, 0.0, "local-minilm")
    assert result.latency_ms > 0


def test_prepare_reports_reuse_and_queries_are_cached(tmp_path: Path) -> None:
    store = EmbeddingStore(tmp_path)

    async def go() -> tuple[int, int, SemanticRetrieval, SemanticRetrieval]:
        first = await local(store).prepare(KB)
        pipeline = local(store)
        second = await pipeline.prepare(KB)
        a = await pipeline.retrieve("t1", "court hearing next week")
        b = await pipeline.retrieve("t2", "court hearing next week")
        return first.embedded, second.reused, a, b

    embedded, reused, a, b = asyncio.run(go())
    assert (embedded, reused) == (len(TOPICS), len(TOPICS))
    assert (a.cache_hits, b.cache_hits) == (0, 1)
    assert a.candidates == b.candidates and a.selections == b.selections


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ProviderError("HTTP 503 after 3 attempts"), "embed: HTTP 503 after 3 attempts"),
        (TimeoutError(), "embed: TimeoutError"),
    ],
)
def test_failing_embedder_gives_an_errored_result(error: Exception, expected: str) -> None:
    pipeline = SemanticPipeline("m", QueryFailingEmbedder(error), CosineReranker(), None, 2)
    result = run_one(pipeline, "anything")
    assert (result.status, result.error) == ("errored", expected)
    assert result.candidates == [] and result.selections == []


def test_failing_reranker_keeps_the_candidates() -> None:
    reranker = StubReranker(error=RuntimeError("tool call\nmissing"))
    result = run_one(SemanticPipeline("m", LocalMiniLMEmbedder(), reranker, None, 1), "q")
    assert (result.status, result.error) == ("errored", "rerank: RuntimeError: tool call missing")
    assert len(result.candidates) == CANDIDATE_K and result.selections == []


def test_a_failed_but_billed_rerank_still_counts_its_cost() -> None:
    billed = Usage(input_tokens=2000, output_tokens=300)
    reranker = StubReranker(error=ProviderError("invalid selection after repair", billed, api_calls=2))
    pipeline = SemanticPipeline(
        "m",
        LocalMiniLMEmbedder(),
        reranker,
        None,
        1,
        rerank_cost=partial(cost_usd, price=Price(input=1.0, output=5.0)),
    )
    result = run_one(pipeline, "q")
    assert result.status == "errored" and result.error == "rerank: invalid selection after repair"
    assert result.usage == billed and result.api_calls == 2
    assert result.cost_usd == pytest.approx((2000 * 1.0 + 300 * 5.0) / 1e6)


def test_reranker_picking_a_non_candidate_is_errored() -> None:
    reranker = StubReranker(picks=["made_up_entity"])
    pipeline = SemanticPipeline("m", LocalMiniLMEmbedder(), reranker, None, 1, rerank_cost=lambda u: 0.0)
    result = run_one(pipeline, "q")
    assert result.status == "errored"
    assert result.error == "rerank: selected entities that were not candidates: made_up_entity"


def test_retrieve_before_prepare_is_errored_not_raised() -> None:
    result = asyncio.run(local().retrieve("t1", "q"))
    assert (result.status, result.error) == ("errored", "prepare: prepare() has not been run")


def test_each_stage_is_priced_at_its_own_rate() -> None:
    embed_price, rerank_price = Price(input=0.06), Price(input=1.0, output=5.0)
    pipeline = SemanticPipeline(
        "m",
        BilledEmbedder(),
        StubReranker(picks=["gray_rock"]),
        None,
        1,
        embed_cost=partial(cost_usd, price=embed_price),
        rerank_cost=partial(cost_usd, price=rerank_price),
    )
    result = run_one(pipeline, "should I go gray rock", trial=2)
    expected = (10 * 0.06 + 1000 * 1.0 + 100 * 5.0) / 1e6
    assert result.status == "ok" and result.cost_usd == pytest.approx(expected)
    assert result.usage == Usage(input_tokens=1010, output_tokens=100)
    assert (result.api_calls, result.trial) == (2, 2)


def test_usage_without_a_price_is_never_free() -> None:
    pipeline = SemanticPipeline("m", BilledEmbedder(), CosineReranker(), None, 1)
    with pytest.raises(ProviderError, match="no price"):
        asyncio.run(pipeline.prepare(KB))


def test_trial_reaches_the_reranker() -> None:
    reranker = StubReranker(picks=["gray_rock"])
    pipeline = SemanticPipeline("m", LocalMiniLMEmbedder(), reranker, None, 1, rerank_cost=lambda u: 0.0)
    assert run_one(pipeline, "q", trial=3).status == "ok"
    assert reranker.trials == [3]


class SlowEmbedder:
    """Tracks how many queries are in flight at once."""

    name = "slow"

    def __init__(self) -> None:
        self.inner = LocalMiniLMEmbedder()
        self.active = self.peak = 0

    async def embed(self, texts: Sequence[str], input_type: InputType) -> EmbedResult:
        self.active += 1
        self.peak = max(self.peak, self.active)
        await asyncio.sleep(0.01)
        self.active -= 1
        return EmbedResult(np.ones((len(texts), 384), dtype=np.float32) / np.sqrt(384))


def test_retrieve_many_keeps_order_and_caps_concurrency() -> None:
    embedder = SlowEmbedder()
    pipeline = SemanticPipeline("m", embedder, CosineReranker(), None, concurrency=3)
    done: list[str] = []
    items = [RetrievalItem(f"t{i}", f"query {i}") for i in range(10)]

    async def go() -> list[SemanticRetrieval]:
        await pipeline.prepare(KB)
        embedder.peak = 0
        return await pipeline.retrieve_many(items, on_done=lambda r: done.append(r.test_id))

    results = asyncio.run(go())
    assert [r.test_id for r in results] == [item.test_id for item in items]
    assert sorted(done) == sorted(item.test_id for item in items)
    assert embedder.peak == 3


def test_build_pipeline_local_and_missing_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache, store = ResponseCache(tmp_path, mode="off"), EmbeddingStore(tmp_path, mode="off")
    hybrid = ModelConfig.model_validate(
        {"key": "local-hybrid", "embedder": {"kind": "local"}, "reranker": {"kind": "hybrid"}}
    )
    pipeline = build_pipeline(hybrid, cache, store, {"gray_rock": ["gray rock"]})
    assert isinstance(pipeline, SemanticPipeline)
    result = run_one(pipeline, "what is gray rock?")
    assert result.selected_ids[0] == "gray_rock"
    assert "keyword 'gray rock'" in (result.selections[0].reason or "")

    monkeypatch.delenv("VOYAGE_API_KEY", raising=False)
    voyage = ModelConfig.model_validate(
        {
            "key": "voyage-rerank",
            "embedder": {"kind": "voyage", "model_id": "voyage-3.5"},
            "reranker": {"kind": "voyage", "model_id": "rerank-2.5"},
        }
    )
    with pytest.raises(ConfigError, match="VOYAGE_API_KEY"):
        build_pipeline(voyage, cache, store, {})


def test_a_kb_without_semantic_entities_yields_empty_ok_results() -> None:
    pipeline = local()

    async def go() -> SemanticRetrieval:
        report = await pipeline.prepare([entity("assistant_persona", LoadMode.ALWAYS)])
        assert (report.entities, report.embedded) == (0, 0)
        return await pipeline.retrieve("t1", "hello")

    result = asyncio.run(go())
    assert (result.status, result.candidates, result.selections) == ("ok", [], [])


class CountingEmbedder:
    """The local model, counting the texts of each query call; `fail_batches` fails any query
    call of more than one text (a batch), so the per-test path must take over."""

    name = "counting"

    def __init__(self, fail_batches: bool = False) -> None:
        self.inner = LocalMiniLMEmbedder()
        self.query_calls: list[int] = []
        self.fail_batches = fail_batches

    async def embed(self, texts: Sequence[str], input_type: InputType) -> EmbedResult:
        if input_type == "query":
            self.query_calls.append(len(texts))
            if self.fail_batches and len(texts) > 1:
                raise ProviderError("model crashed on the batch")
        return await self.inner.embed(texts, input_type)


QUERIES = ["How do I answer a hostile text?", "Court hearing next week", "How do I answer a hostile text?"]


def _retrieve_all(pipeline: SemanticPipeline) -> list[SemanticRetrieval]:
    async def go() -> list[SemanticRetrieval]:
        await pipeline.prepare(KB)
        items = [RetrievalItem(f"t{i}", q) for i, q in enumerate(QUERIES)]
        return await pipeline.retrieve_many(items)

    return asyncio.run(go())


def test_batched_queries_are_embedded_in_one_call_with_the_same_results(tmp_path: Path) -> None:
    one_by_one = _retrieve_all(SemanticPipeline("m", CountingEmbedder(), CosineReranker(), None, 2))
    embedder = CountingEmbedder()
    store = EmbeddingStore(tmp_path)
    batched = _retrieve_all(SemanticPipeline("m", embedder, CosineReranker(), store, 2, batch_queries=True))
    assert embedder.query_calls == [2]  # two distinct queries, one call
    # Padding to a batch's longest query may move a score in its last bits, never an order.
    assert [r.selections for r in batched] == [r.selections for r in one_by_one]
    for b, o in zip(batched, one_by_one, strict=True):
        assert [c.entity_id for c in b.candidates] == [c.entity_id for c in o.candidates]
        assert [c.score for c in b.candidates] == pytest.approx([c.score for c in o.candidates], abs=1e-5)
    assert [r.cache_hits for r in batched] == [0, 0, 0]
    again = CountingEmbedder()
    rerun = _retrieve_all(SemanticPipeline("m", again, CosineReranker(), store, 2, batch_queries=True))
    assert again.query_calls == [] and [r.cache_hits for r in rerun] == [1, 1, 1]


def test_a_failed_query_batch_falls_back_to_each_test_alone() -> None:
    embedder = CountingEmbedder(fail_batches=True)
    results = _retrieve_all(SemanticPipeline("m", embedder, CosineReranker(), None, 1, batch_queries=True))
    assert embedder.query_calls == [2, 1, 1, 1] and all(r.status == "ok" for r in results)


@pytest.mark.parametrize(("entities", "depth"), [(16, 15), (2_003, 15), (2_003, 100)])
def test_top_candidates_rank_ties_by_entity_id_alone_and_in_a_block(entities: int, depth: int) -> None:
    # Integer vectors make many equal scores: ties rank by entity_id (the index's row order),
    # for a lone query and for a block of them (tests/core/test_similarity.py has the contract).
    from eval_pipeline.providers.semantic_pipeline import _Index

    rng = np.random.default_rng(entities)
    kb = [entity(f"e{i:04d}") for i in range(entities)]
    matrix = rng.integers(0, 4, size=(entities, 8)).astype(np.float32)
    index = _Index(kb, matrix)
    queries = rng.integers(0, 3, size=(40, 8)).astype(np.float32)
    ranked = index.top_many(queries, depth)
    for query, block_top in zip(queries, ranked, strict=True):
        scores = (matrix.astype(np.int64) @ query.astype(np.int64)).tolist()
        full_sort = sorted(range(entities), key=lambda i: (-scores[i], f"e{i:04d}"))[:depth]
        assert [c.entity_id for c in index.top(query, depth)] == [f"e{i:04d}" for i in full_sort]
        assert block_top == index.top(query, depth)

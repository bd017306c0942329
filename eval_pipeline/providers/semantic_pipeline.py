"""The semantic mechanism as a system under test: embed the query, take the top 15 entities by
cosine, let the reranker pick the final 6 in order.

A failing stage never raises out of `retrieve`: the test comes back `errored` with
"<stage>: <reason>", so one bad call cannot sink a run and errored tests are never scored.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from eval_pipeline.core.inputs.kb import Entity, LoadMode
from eval_pipeline.core.mechanisms.retrieval import (
    CANDIDATE_K,
    SELECTION_K,
    Candidate,
    SemanticRetrieval,
    Usage,
)
from eval_pipeline.providers.base import (
    Embedder,
    ProviderError,
    RerankCandidate,
    Reranker,
    Selection,
    Vectors,
)
from eval_pipeline.providers.cache import EmbeddingStore, Vector
from eval_pipeline.providers.target import OnDone, PrepareReport, RetrievalItem, retrieve_all

CostFn = Callable[[Usage], float]


def _no_billing(usage: Usage) -> float:
    """Cost function for a stage with no price: fine while it reports no usage, loud otherwise."""
    if usage != Usage():
        raise ProviderError("reported token usage but the pipeline has no price for it")
    return 0.0


def _reason(exc: Exception) -> str:
    name, text = type(exc).__name__, " ".join(str(exc).split())
    if isinstance(exc, ProviderError):
        return text or name
    return f"{name}: {text}" if text else name


@dataclass
class _Tally:
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    api_calls: int = 0
    cache_hits: int = 0

    def add(self, usage: Usage, api_calls: int, cache_hits: int, cost_fn: CostFn) -> None:
        self.cost_usd += cost_fn(usage)
        self.usage = self.usage + usage
        self.api_calls += api_calls
        self.cache_hits += cache_hits


@dataclass(frozen=True)
class _Index:
    """The KB's semantic entities, sorted by entity_id, and their vectors row by row."""

    entities: list[Entity]
    matrix: Vectors

    @cached_property
    def by_id(self) -> dict[str, Entity]:
        return {e.entity_id: e for e in self.entities}

    def shown(self, candidates: Sequence[Candidate]) -> list[RerankCandidate]:
        """What the reranker sees of each candidate."""
        return [
            RerankCandidate(
                entity_id=c.entity_id,
                title=self.by_id[c.entity_id].title,
                summary=self.by_id[c.entity_id].summary,
                cosine=c.score,
            )
            for c in candidates
        ]

    def top(self, query_vec: Vector, k: int) -> list[Candidate]:
        if not self.entities:
            return []
        scores = self.matrix @ query_vec
        # Stable sort over rows already in entity_id order: equal scores rank by entity_id.
        order = np.argsort(-scores, kind="stable")[:k]
        return [Candidate(entity_id=self.entities[i].entity_id, score=float(scores[i])) for i in order]


def _check_selections(selections: Sequence[Selection], candidates: Sequence[Candidate]) -> None:
    ids = [s.entity_id for s in selections]
    unknown = sorted(set(ids) - {c.entity_id for c in candidates})
    if unknown:
        raise ProviderError(f"selected entities that were not candidates: {', '.join(unknown)}")
    if len(set(ids)) != len(ids) or len(ids) > SELECTION_K:
        raise ProviderError(f"expected up to {SELECTION_K} distinct selections, got {ids}")
    if sorted(s.rank for s in selections) != list(range(1, len(selections) + 1)):
        raise ProviderError(f"selection ranks are not 1..{len(selections)}")


class SemanticPipeline:
    """Embedding top-15 then rerank top-6 for one model. Call `prepare` once, then `retrieve`.

    Entity vectors (document input type) and query vectors are kept in `store` under the
    embedder's name, so only new or edited entities and new queries are ever embedded. Each
    stage's usage is priced by its own cost function; a stage left without one must report no
    usage (true of the local models), so a missing price can never read as $0.
    """

    def __init__(
        self,
        model_key: str,
        embedder: Embedder,
        reranker: Reranker,
        store: EmbeddingStore | None,
        concurrency: int,
        *,
        embed_cost: CostFn = _no_billing,
        rerank_cost: CostFn = _no_billing,
        batch_queries: bool = False,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.model_key = model_key
        self._embedder = embedder
        self._reranker = reranker
        self._store = store
        self._concurrency = concurrency
        self._embed_cost = embed_cost
        self._rerank_cost = rerank_cost
        self._index: _Index | None = None
        self._batch_queries = batch_queries
        self._queries: dict[str, tuple[Vector, bool]] = {}  # key -> (vector, was it stored)

    async def prepare(self, kb_entities: Sequence[Entity]) -> PrepareReport:
        """Index the SEMANTIC entities. Raises on failure: without an index no test can run."""
        entities = sorted(
            (e for e in kb_entities if e.load_mode is LoadMode.SEMANTIC), key=lambda e: e.entity_id
        )
        hashes = [e.content_hash for e in entities]
        known = self._store.get_many(self._embedder.name, hashes) if self._store else {}
        todo = [e for e in entities if e.content_hash not in known]
        tally = _Tally()
        fresh = await self._embed_documents(todo, tally)
        vectors = {**known, **fresh}
        matrix = np.stack([vectors[h] for h in hashes]) if entities else np.empty((0, 0))
        self._index = _Index(entities, matrix.astype(np.float32))
        return PrepareReport(
            entities=len(entities),
            embedded=len(todo),
            reused=len(entities) - len(todo),
            usage=tally.usage,
            cost_usd=tally.cost_usd,
            api_calls=tally.api_calls,
        )

    async def _embed_documents(self, todo: Sequence[Entity], tally: _Tally) -> dict[str, Vector]:
        if not todo:
            return {}
        result = await self._embedder.embed([e.embedding_text() for e in todo], "document")
        if result.vectors.shape[0] != len(todo):
            raise ProviderError(
                f"{self._embedder.name}: {result.vectors.shape[0]} vectors for {len(todo)} texts"
            )
        tally.add(result.usage, result.api_calls, result.cache_hits, self._embed_cost)
        fresh = {e.content_hash: result.vectors[i] for i, e in enumerate(todo)}
        if self._store:
            self._store.put_many(self._embedder.name, fresh)
        return fresh

    async def _prefetch_queries(self, queries: Sequence[str]) -> None:
        """Look up every query in the store at once and embed the missing ones in one call.

        Only for a free local embedder (`batch_queries`): one batched inference instead of one
        per query is most of a cold run's time, and with no usage to bill nothing is misattributed
        (an API embedder's call and cost stay with the test that made it). A failed batch is not
        reported here: each of its tests then embeds its own query and errors with the reason.
        """
        keys = {EmbeddingStore.query_key("query", q): q for q in dict.fromkeys(queries)}
        known = self._store.get_many(self._embedder.name, list(keys)) if self._store else {}
        self._queries.update({k: (v, True) for k, v in known.items()})
        todo = [k for k in keys if k not in known]
        if not todo:
            return
        try:
            result = await self._embedder.embed([keys[k] for k in todo], "query")
        except Exception:  # each test retries alone and reports its own error
            return
        if result.vectors.shape[0] != len(todo) or result.usage != Usage():
            return
        fresh = {k: result.vectors[i] for i, k in enumerate(todo)}
        if self._store:
            self._store.put_many(self._embedder.name, fresh)
        self._queries.update({k: (v, False) for k, v in fresh.items()})

    async def _embed_query(self, query: str, tally: _Tally) -> Vector:
        key = EmbeddingStore.query_key("query", query)
        if key in self._queries:
            prefetched, was_stored = self._queries[key]
            tally.cache_hits += was_stored
            return prefetched
        if self._store:
            stored = self._store.get_many(self._embedder.name, [key]).get(key)
            if stored is not None:
                tally.cache_hits += 1
                return stored
        result = await self._embedder.embed([query], "query")
        tally.add(result.usage, result.api_calls, result.cache_hits, self._embed_cost)
        if result.vectors.shape[0] != 1:
            raise ProviderError(f"{self._embedder.name}: {result.vectors.shape[0]} vectors for 1")
        vector: Vector = result.vectors[0]
        if self._store:
            self._store.put_many(self._embedder.name, {key: vector})
        return vector

    async def _rerank(
        self,
        query: str,
        candidates: list[Candidate],
        shown: list[RerankCandidate],
        trial: int,
        tally: _Tally,
    ) -> list[Selection]:
        try:
            result = await self._reranker.rerank(query, shown, SELECTION_K, trial=trial)
        except ProviderError as exc:
            tally.add(exc.usage, exc.api_calls, 0, self._rerank_cost)  # billed even though it failed
            raise
        tally.add(result.usage, result.api_calls, result.cache_hits, self._rerank_cost)
        _check_selections(result.selections, candidates)
        return sorted(result.selections, key=lambda s: s.rank)

    async def retrieve(self, test_id: str, query: str, trial: int = 0) -> SemanticRetrieval:
        """Run one test's query through both stages. Never raises (except on cancellation)."""
        started = time.perf_counter()
        tally = _Tally()
        candidates: list[Candidate] = []
        selections: list[Selection] = []
        stage, error, index = "prepare", None, self._index
        try:
            if index is None:
                raise ProviderError("prepare() has not been run")
            stage = "embed"
            candidates = index.top(await self._embed_query(query, tally), CANDIDATE_K)
            stage = "rerank"
            shown = index.shown(candidates)
            selections = await self._rerank(query, candidates, shown, trial, tally)
        except Exception as exc:  # any stage failure is the test's outcome, not the run's
            error = f"{stage}: {_reason(exc)}"
        return SemanticRetrieval(
            test_id=test_id,
            model=self.model_key,
            trial=trial,
            status="ok" if error is None else "errored",
            candidates=candidates,
            selections=selections,
            usage=tally.usage,
            cost_usd=tally.cost_usd,
            latency_ms=(time.perf_counter() - started) * 1000,
            api_calls=tally.api_calls,
            cache_hits=tally.cache_hits,
            error=error,
        )

    async def retrieve_many(
        self, items: Sequence[RetrievalItem], on_done: OnDone | None = None
    ) -> list[SemanticRetrieval]:
        """All items, at most `concurrency` at a time; results in input order."""

        async def one(item: RetrievalItem) -> SemanticRetrieval:
            return await self.retrieve(item.test_id, item.query, item.trial)

        if self._batch_queries:
            await self._prefetch_queries([item.query for item in items])
        return await retrieve_all(one, items, self._concurrency, on_done)

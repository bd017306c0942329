"""The semantic mechanism as a system under test: embed the query, take the top entities by
cosine (15 unless the model sets `candidate_depth`), let the reranker pick the final 6 in order.

A failing stage never raises out of `retrieve`: the test comes back `errored` with "<stage>:
<reason>". With `batch=True` and a reranker that can batch (Claude), every embedding stage runs
first and the reranks go as one message batch: the same selections, at the batch discount.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter

import numpy as np
import numpy.typing as npt

from eval_pipeline.core.inputs.kb import Entity, LoadMode
from eval_pipeline.core.inputs.stage_depths import CANDIDATE_K, SELECTION_K
from eval_pipeline.core.mechanisms.retrieval import NO_USAGE, Candidate, Selection, SemanticRetrieval, Usage
from eval_pipeline.core.mechanisms.similarity import cosine_scores, top_k
from eval_pipeline.providers.base import (
    BatchReranker,
    CatalogueReranker,
    Embedder,
    ProviderError,
    RerankCandidate,
    Reranker,
    RerankRequest,
    RerankResult,
    Vectors,
)
from eval_pipeline.providers.cache import EmbeddingStore, Vector
from eval_pipeline.providers.pricing import BATCH_DISCOUNT
from eval_pipeline.providers.target import OnDone, PrepareReport, RetrievalItem, retrieve_all

CostFn = Callable[[Usage], float]


def _no_billing(usage: Usage) -> float:
    """Cost function for a stage with no price: fine while it reports no usage, loud otherwise."""
    if usage.any_tokens:
        raise ProviderError("reported token usage but the pipeline has no price for it")
    return 0.0


def _reason(exc: Exception) -> str:
    name, text = type(exc).__name__, " ".join(str(exc).split())
    if isinstance(exc, ProviderError):
        return text or name
    return f"{name}: {text}" if text else name


@dataclass
class _Tally:
    usage: Usage = NO_USAGE
    cost_usd: float = 0.0
    api_calls: int = 0
    cache_hits: int = 0

    def add(
        self, cost_fn: CostFn, usage: Usage, api_calls: int, cache_hits: int = 0, batch: Usage = NO_USAGE
    ) -> None:
        """`batch` is usage billed through a message batch, at its discount."""
        for used, rate in ((usage, 1.0), (batch, BATCH_DISCOUNT)):
            if used.any_tokens:  # no tokens cost nothing at any price
                self.cost_usd += cost_fn(used) * rate
                self.usage = self.usage + used
        self.api_calls += api_calls
        self.cache_hits += cache_hits


@dataclass
class _Staged:
    """One test after the embedding stage, waiting for its rerank."""

    item: RetrievalItem
    started: float
    tally: _Tally
    candidates: list[Candidate] = field(default_factory=list)
    shown: list[RerankCandidate] = field(default_factory=list)
    error: str | None = None


@dataclass
class _Query:
    """A prefetched query's vector, whether the store had it, and its share of the call that
    embedded it (usage, calls) until a test is billed for it."""

    vector: Vector
    stored: bool
    bill: tuple[Usage, int] | None = None


def _share(usage: Usage, api_calls: int, weights: Sequence[int]) -> list[tuple[Usage, int] | None]:
    """`usage` split over the texts in proportion to `weights` (whole tokens, largest remainders
    first, so the parts add up exactly), and one of the `api_calls` to each of the first texts.
    None for a text with nothing to bill."""
    total = sum(weights) or 1
    fields: dict[str, list[int]] = {}
    for name in Usage.model_fields:
        amount = getattr(usage, name)
        exact = [amount * w / total for w in weights]
        parts = [int(x) for x in exact]
        for i in sorted(range(len(exact)), key=lambda i: parts[i] - exact[i])[: amount - sum(parts)]:
            parts[i] += 1
        fields[name] = parts
    bills: list[tuple[Usage, int] | None] = []
    for i in range(len(weights)):
        part = Usage(**{name: parts[i] for name, parts in fields.items()})
        calls = 1 if i < api_calls else 0
        bills.append((part, calls) if calls or part.any_tokens else None)
    return bills


@dataclass(frozen=True)
class _Index:
    """The KB's semantic entities, sorted by entity_id, and their vectors row by row."""

    entities: list[Entity]
    matrix: Vectors

    @cached_property
    def _seen(self) -> dict[str, tuple[str, str]]:
        """Each entity's title and summary by id: a candidate's look-up is one dict access."""
        return {e.entity_id: (e.title, e.summary) for e in self.entities}

    @cached_property
    def ids(self) -> npt.NDArray[np.object_]:
        """The entity ids by row, as an array: a block's top rows become ids in one indexing."""
        return np.array([e.entity_id for e in self.entities], dtype=object)

    def shown(self, candidates: Sequence[Candidate]) -> list[RerankCandidate]:
        """What the reranker sees of each candidate."""
        seen, make = self._seen, RerankCandidate._make
        return [make((c.entity_id, *seen[c.entity_id], c.score)) for c in candidates]

    def catalogue(self) -> list[RerankCandidate]:
        """Every entity as a reranker sees it (no score)."""
        return self.shown([Candidate(entity_id=e.entity_id, score=0.0) for e in self.entities])

    def top(self, query_vec: Vector, k: int) -> list[Candidate]:
        return self.top_many(query_vec[np.newaxis, :], k)[0]

    @cached_property
    def _vectors(self) -> npt.NDArray[np.float64]:
        return self.matrix.astype(np.float64)

    def top_many(self, queries: Vectors, k: int) -> list[list[Candidate]]:
        """Each query row's top `k` entities by cosine, best first, under the numeric contract
        (`core.mechanisms.similarity`): a test's scores do not depend on who ran with it."""
        if not self.entities:
            return [[] for _ in range(len(queries))]
        ids = self.ids
        ranked: list[list[Candidate]] = []
        for start in range(0, len(queries), _QUERY_BLOCK):
            scores = cosine_scores(queries[start : start + _QUERY_BLOCK], self._vectors)
            rows = top_k(scores, k)
            values = np.take_along_axis(scores, rows, axis=1).tolist()
            top_ids = ids[rows].tolist()
            ranked += [list(map(Candidate, row, vals)) for row, vals in zip(top_ids, values, strict=True)]
        return ranked


# Queries scored per matrix product: bounds the block of scores (block x entities float64, 40 MB
# at 5,000 entities) whatever the bank's size.
_QUERY_BLOCK = 1024


def _query_keys(queries: Sequence[str]) -> dict[str, str]:
    """Each distinct query by its store key."""
    return {EmbeddingStore.query_key("query", q): q for q in dict.fromkeys(queries)}


def _semantic(kb_entities: Sequence[Entity]) -> list[Entity]:
    return sorted((e for e in kb_entities if e.load_mode is LoadMode.SEMANTIC), key=attrgetter("entity_id"))


@dataclass(frozen=True)
class StoredView:
    """The store's part of a run: the semantic entities it has no vector for, the catalogue a
    reranker sees, the queries it has vectors for and, when every entity has one, their candidates."""

    to_embed: list[Entity]
    catalogue: list[RerankCandidate]
    stored_queries: set[str]
    candidates: dict[str, list[RerankCandidate]]


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

    Vectors are kept in `store` under the embedder's name: only new or edited entities and new
    queries are embedded. Each stage's usage is priced by its own cost function (none: it must
    report no usage, so a missing price never reads as $0). With `batch_queries`, `retrieve_many`
    embeds and ranks a run's queries up front in one pass."""

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
        batch: bool = False,
        candidate_depth: int = CANDIDATE_K,
    ) -> None:
        self.model_key = model_key
        self.embedder = embedder
        self.reranker = reranker
        self._store = store
        self._concurrency = concurrency
        self._embed_cost = embed_cost
        self._rerank_cost = rerank_cost
        self._batch = batch
        self._depth = candidate_depth
        self._index: _Index | None = None
        self._batch_queries = batch_queries
        # The prefetched queries, by their text (a store key is a function of it, computed once).
        self._queries: dict[str, _Query] = {}
        self._ranked: dict[str, list[Candidate]] = {}  # their candidates

    def _get(self, keys: Sequence[str]) -> dict[str, Vector]:
        return self._store.get_many(self.embedder.name, keys) if self._store else {}

    def _put(self, vectors: dict[str, Vector]) -> None:
        if self._store:
            self._store.put_many(self.embedder.name, vectors)

    def stored(self, kb_entities: Sequence[Entity], queries: Sequence[str]) -> StoredView:
        """What the embedding store already holds, read without a call (for estimates)."""
        entities = _semantic(kb_entities)
        hashes = [e.content_hash for e in entities]
        known = self._get(hashes)
        keys = _query_keys(queries)
        vectors = self._get(list(keys))
        candidates: dict[str, list[RerankCandidate]] = {}
        if entities and all(h in known for h in hashes):  # only then are a query's candidates known
            index = _Index(entities, np.stack([known[h] for h in hashes]).astype(np.float32))
            stored = list(vectors)
            tops = index.top_many(np.stack([vectors[k] for k in stored]), self._depth) if stored else []
            candidates = {keys[k]: index.shown(top) for k, top in zip(stored, tops, strict=True)}
        return StoredView(
            to_embed=[e for e in entities if e.content_hash not in known],
            catalogue=_Index(entities, np.empty((0, 0), dtype=np.float32)).catalogue(),
            stored_queries={keys[k] for k in vectors},
            candidates=candidates,
        )

    async def prepare(self, kb_entities: Sequence[Entity]) -> PrepareReport:
        """Index the SEMANTIC entities. Raises on failure: without an index no test can run."""
        entities = _semantic(kb_entities)
        hashes = [e.content_hash for e in entities]
        tally = _Tally()
        todo: list[Entity] = []
        # The whole matrix as one stored array when these entities were indexed before.
        matrix = self._store.get_matrix(self.embedder.name, hashes) if self._store and entities else None
        if matrix is None:
            vectors = self._get(hashes)
            todo = [e for e in entities if e.content_hash not in vectors]
            if todo:
                result = await self.embedder.embed([e.embedding_text() for e in todo], "document")
                if result.vectors.shape[0] != len(todo):
                    raise ProviderError(
                        f"{self.embedder.name}: {result.vectors.shape[0]} vectors for {len(todo)} texts"
                    )
                tally.add(self._embed_cost, result.usage, result.api_calls, result.cache_hits)
                fresh = {e.content_hash: result.vectors[i] for i, e in enumerate(todo)}
                self._put(fresh)
                vectors.update(fresh)
            matrix = np.stack([vectors[h] for h in hashes]).astype(np.float32) if entities else None
            if self._store and matrix is not None:
                self._store.put_matrix(self.embedder.name, hashes, matrix)
        self._index = _Index(entities, matrix if matrix is not None else np.empty((0, 0), dtype=np.float32))
        prompt_cache = None
        if isinstance(self.reranker, CatalogueReranker):
            prompt_cache = await self.reranker.prepare(self._index.catalogue())
        return PrepareReport(
            entities=len(entities),
            embedded=len(todo),
            reused=len(entities) - len(todo),
            usage=tally.usage,
            cost_usd=tally.cost_usd,
            api_calls=tally.api_calls,
            prompt_cache=prompt_cache,
        )

    async def _prefetch_queries(self, queries: Sequence[str]) -> None:
        """Look up every query in the store at once, embed the missing ones in one call (split by
        the embedder within its provider's caps), then rank them all against the index in one pass.
        The call's usage is shared out among its tests (`_share`), so they add up to what it spent;
        when it fails, each of its tests embeds its own query and errors with the reason."""
        keys = _query_keys(queries)
        known = self._get(list(keys))
        self._queries.update({keys[k]: _Query(v, stored=True) for k, v in known.items()})
        todo = [k for k in keys if k not in known]
        if todo:
            try:
                result = await self.embedder.embed([keys[k] for k in todo], "query")
            except Exception:  # each test retries alone and reports its own error
                result = None
            if result is not None and result.vectors.shape[0] == len(todo):
                fresh = {k: result.vectors[i] for i, k in enumerate(todo)}
                self._put(fresh)
                bills = _share(result.usage, result.api_calls, [len(keys[k]) for k in todo])
                self._queries.update(
                    {
                        keys[k]: _Query(fresh[k], stored=False, bill=bill)
                        for k, bill in zip(todo, bills, strict=True)
                    }
                )
        if self._index is not None and self._queries:
            ranked = list(self._queries)
            tops = self._index.top_many(np.stack([self._queries[k].vector for k in ranked]), self._depth)
            self._ranked.update(zip(ranked, tops, strict=True))

    async def _embed_query(self, query: str, tally: _Tally) -> Vector:
        prefetched = self._queries.get(query)
        if prefetched is not None:
            tally.cache_hits += prefetched.stored
            if prefetched.bill is not None:  # billed to the first test asking, once
                tally.add(self._embed_cost, *prefetched.bill)
                prefetched.bill = None
            return prefetched.vector
        key = EmbeddingStore.query_key("query", query)
        if (stored := self._get([key]).get(key)) is not None:
            tally.cache_hits += 1
            return stored
        result = await self.embedder.embed([query], "query")
        tally.add(self._embed_cost, result.usage, result.api_calls, result.cache_hits)
        if result.vectors.shape[0] != 1:
            raise ProviderError(f"{self.embedder.name}: {result.vectors.shape[0]} vectors for 1")
        vector: Vector = result.vectors[0]
        self._put({key: vector})
        return vector

    async def _stage(self, item: RetrievalItem) -> _Staged:
        """The embedding stage: the top-15 candidates, or the reason there are none."""
        staged = _Staged(item, time.perf_counter(), _Tally())
        stage, index = "prepare", self._index
        try:
            if index is None:
                raise ProviderError("prepare() has not been run")
            stage = "embed"
            vector = await self._embed_query(item.query, staged.tally)
            # Ranked with the run's other queries when it was prefetched.
            ranked = self._ranked.get(item.query)
            staged.candidates = list(ranked) if ranked is not None else index.top(vector, self._depth)
            staged.shown = index.shown(staged.candidates)
        except Exception as exc:  # any stage failure is the test's outcome, not the run's
            staged.error = f"{stage}: {_reason(exc)}"
        return staged

    def _finish(self, staged: _Staged, outcome: RerankResult | Exception | None) -> SemanticRetrieval:
        """The test's result: its rerank outcome (a failed one too) billed, its selections checked."""
        selections: list[Selection] = []
        error, tally, item = staged.error, staged.tally, staged.item
        if error is None and outcome is not None:
            try:
                if isinstance(outcome, Exception):
                    if isinstance(outcome, ProviderError):  # billed even though it failed
                        tally.add(
                            self._rerank_cost, outcome.usage, outcome.api_calls, batch=outcome.batch_usage
                        )
                    raise outcome
                usage, calls, hits = outcome.usage, outcome.api_calls, outcome.cache_hits
                tally.add(self._rerank_cost, usage, calls, hits, outcome.batch_usage)
                _check_selections(outcome.selections, staged.candidates)
                selections = sorted(outcome.selections, key=lambda s: s.rank)
            except Exception as exc:
                error = f"rerank: {_reason(exc)}"
        return SemanticRetrieval(
            test_id=item.test_id,
            model=self.model_key,
            trial=item.trial,
            status="ok" if error is None else "errored",
            candidates=staged.candidates,
            selections=selections,
            usage=tally.usage,
            cost_usd=tally.cost_usd,
            latency_ms=(time.perf_counter() - staged.started) * 1000,
            api_calls=tally.api_calls,
            cache_hits=tally.cache_hits,
            error=error,
        )

    async def retrieve(self, test_id: str, query: str, trial: int = 0) -> SemanticRetrieval:
        """Run one test's query through both stages. Never raises (except on cancellation)."""
        return await self._retrieve(RetrievalItem(test_id, query, trial))

    async def _retrieve(self, item: RetrievalItem) -> SemanticRetrieval:
        staged = await self._stage(item)
        if staged.error is not None:
            return self._finish(staged, None)
        try:
            outcome: RerankResult | Exception = await self.reranker.rerank(
                item.query, staged.shown, SELECTION_K, trial=item.trial
            )
        except Exception as exc:  # the test's outcome, not the run's
            outcome = exc
        return self._finish(staged, outcome)

    async def retrieve_many(
        self, items: Sequence[RetrievalItem], on_done: OnDone | None = None
    ) -> list[SemanticRetrieval]:
        """All items, at most `concurrency` at a time; results in input order."""
        if self._batch_queries:
            await self._prefetch_queries([item.query for item in items])
        if self._batch and isinstance(self.reranker, BatchReranker):
            return await self._retrieve_batched(self.reranker, items, on_done)
        return await retrieve_all(self._retrieve, items, self._concurrency, on_done)

    async def _retrieve_batched(
        self, reranker: BatchReranker, items: Sequence[RetrievalItem], on_done: OnDone | None
    ) -> list[SemanticRetrieval]:
        """Every embedding stage, then one rerank batch for the tests that reached it."""
        staged = await retrieve_all(self._stage, items, self._concurrency)
        ready = [s for s in staged if s.error is None]
        try:
            answers: list[RerankResult | ProviderError] = await reranker.rerank_batch(
                [RerankRequest(s.item.query, s.shown, SELECTION_K, s.item.trial) for s in ready]
            )
        except ProviderError as exc:  # the batch itself failed: every test it held errors
            answers = [ProviderError(f"message batch failed: {exc}")] * len(ready)
        by_position = {id(s): a for s, a in zip(ready, answers, strict=True)}
        results = [self._finish(s, by_position.get(id(s))) for s in staged]
        if on_done is not None:
            for result in results:
                on_done(result)
        return results

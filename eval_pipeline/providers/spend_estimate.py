"""What a run would spend, per model, before it calls anything: API calls, tokens and USD.

The counts come from the run's own pipeline, response cache and embedding store, only read: what
they hold counts as cached and costs nothing. Tokens are estimated offline; a rerank answer's
output is a planning figure, bounded by the reranker's output cap. Not included: repair calls
after an invalid answer, retried failures, and a non-reproducible model's re-trials.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.kb import Entity
from eval_pipeline.core.inputs.loading import Banks
from eval_pipeline.core.inputs.stage_depths import SELECTION_K
from eval_pipeline.core.mechanisms.retrieval import Usage
from eval_pipeline.core.scoring.evaluation import Scope
from eval_pipeline.core.scoring.implementations import system_requests
from eval_pipeline.providers.base import InputType, RerankCandidate
from eval_pipeline.providers.cache import CacheMode, EmbeddingStore, ResponseCache
from eval_pipeline.providers.factory import build_pipeline
from eval_pipeline.providers.models import ModelConfig, missing_keys
from eval_pipeline.providers.pricing import cost_usd, prefix_usage
from eval_pipeline.providers.prompt_cache import estimate_tokens
from eval_pipeline.providers.semantic_pipeline import SemanticPipeline, StoredView
from eval_pipeline.providers.target import RetrievalItem, retrieval_items
from eval_pipeline.providers.url_redaction import redact_url

OUTPUT_TOKENS_PER_PICK = 25  # planning figure: an entity id and a one-line reason
TOKEN_COUNT_CALLS = 2  # a Claude reranker counts its prefix once per run: free


@dataclass(frozen=True)
class StageSpend:
    """One stage's calls: `cost_usd` is None where eval-pipeline knows no price (the team's system)."""

    stage: str
    model_id: str
    calls: int
    cached: int
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = 0.0
    max_cost_usd: float | None = 0.0
    note: str = ""

    @property
    def input_tokens(self) -> int:
        u = self.usage
        return u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens


@dataclass(frozen=True)
class ModelSpend:
    model: str
    stages: list[StageSpend]

    @property
    def calls(self) -> int:
        return sum(s.calls for s in self.stages)

    @property
    def input_tokens(self) -> int:
        return sum(s.input_tokens for s in self.stages)

    @property
    def output_tokens(self) -> int:
        return sum(s.usage.output_tokens for s in self.stages)

    @property
    def cost_usd(self) -> float:
        return sum(s.cost_usd or 0.0 for s in self.stages)

    @property
    def max_cost_usd(self) -> float:
        return sum(s.max_cost_usd or 0.0 for s in self.stages)

    @property
    def unpriced(self) -> bool:
        return any(s.cost_usd is None for s in self.stages)


def estimate_spend(
    cfg: ModelConfig,
    kb_entities: Sequence[Entity],
    banks: Banks,
    scope: Scope,
    cache_dir: Path,
    cache_mode: CacheMode,
    *,
    batch: bool = False,
    environ: Mapping[str, str] | None = None,
    embedded: set[tuple[str, str, str]] | None = None,
) -> ModelSpend:
    """What running `scope` of `banks` through `cfg` would spend; calls nothing, writes nothing.

    `embedded` collects (embedder, input type, text) across the models of one run: a text an
    earlier model embeds is in the cache by the time a later one with that embedder asks."""
    tests = scope.select(Mechanism.SEMANTIC, banks.semantic_tests)
    items = retrieval_items(tests, cfg.trials)
    stages = [_system(cfg, banks, scope, len(items))] if cfg.system is not None else []
    if items and cfg.embedder is not None and cfg.reranker is not None and cfg.uses_api:
        # The run's own pipeline on its caches, only read: a cache file not there yet is read as
        # empty rather than created.
        def readable(filename: str) -> CacheMode:
            return cache_mode if (cache_dir / filename).is_file() else "off"

        cache = ResponseCache(cache_dir, readable(ResponseCache.FILENAME))
        store = EmbeddingStore(cache_dir, readable(EmbeddingStore.FILENAME))
        # A key not set yet is no reason not to price: the clients are built, never called.
        env = os.environ if environ is None else environ
        unset = dict.fromkeys(missing_keys(cfg, env), "unset: an estimate calls nothing")
        try:
            boosts = banks.rules.boosts_by_entity() if banks.rules else {}
            pipeline = build_pipeline(cfg, cache, store, boosts, {**env, **unset}, batch)
            assert isinstance(pipeline, SemanticPipeline)  # the built-in stages, not the team's system
            view = pipeline.stored(kb_entities, [item.query for item in items])
            stages += [
                *_embeddings(cfg, pipeline, view, items, set() if embedded is None else embedded),
                *_reranks(cfg, pipeline, view, items, batch),
            ]
        finally:
            cache.close()
            store.close()
    return ModelSpend(cfg.key, [s for s in stages if s.calls or s.cached])


def _system(cfg: ModelConfig, banks: Banks, scope: Scope, semantic_items: int) -> StageSpend:
    assert cfg.system is not None
    calls = len(system_requests(banks, scope, cfg.system_mechanisms))
    calls += semantic_items if cfg.system.runs(Mechanism.SEMANTIC) else 0
    where = redact_url(cfg.system.url) if cfg.system.url else "python entry point"
    return StageSpend(
        "team system", where, calls, 0, cost_usd=None, max_cost_usd=None, note="not priced here"
    )


def _embeddings(
    cfg: ModelConfig,
    pipeline: SemanticPipeline,
    view: StoredView,
    items: Sequence[RetrievalItem],
    embedded: set[tuple[str, str, str]],
) -> list[StageSpend]:
    from eval_pipeline.providers.voyage import VoyageEmbedder, plan_batches

    embedder = pipeline.embedder
    if not isinstance(embedder, VoyageEmbedder):  # local: free, and no call
        return []
    queries = list(dict.fromkeys(item.query for item in items))
    wanted: list[tuple[InputType, str]] = [
        ("document", t) for t in dict.fromkeys(e.embedding_text() for e in view.to_embed)
    ]
    wanted += [("query", q) for q in queries if q not in view.stored_queries]
    earlier = {(kind, t) for kind, t in wanted if (embedder.name, kind, t) in embedded}
    todo = [(kind, t) for kind, t in wanted if (kind, t) not in earlier and not embedder.cached(t, kind)]
    embedded.update((embedder.name, kind, t) for kind, t in todo)
    usage = Usage(input_tokens=sum(estimate_tokens(t) for _, t in todo))
    cost = cost_usd(usage, cfg.price(embedder.model_id))
    calls, parts = 0, []
    for kind, what in (("document", "KB entities"), ("query", "queries")):
        texts = [t for k, t in todo if k == kind]
        batches = len(plan_batches(texts, max_tokens=embedder.max_batch_tokens))
        calls += batches
        parts += [f"{len(texts)} {what} in {batches} call(s)"] if texts else []
    parts += [f"{len(earlier)} of the cached embedded by an earlier model of this run"] if earlier else []
    cached = len(view.catalogue) + len(queries) - len(todo)
    return [StageSpend("embeddings", embedder.model_id, calls, cached, usage, cost, cost, "; ".join(parts))]


def _typical(catalogue: Sequence[RerankCandidate], k: int) -> list[RerankCandidate]:
    """k real entities spread over the catalogue's lengths: a request whose candidates are not
    known yet (its query has no stored vector) is about as long as they are."""
    by_length = sorted(catalogue, key=lambda c: len(c.title) + len(c.summary))
    if len(by_length) <= k:
        return by_length
    return [by_length[round(i * (len(by_length) - 1) / (k - 1))] for i in range(k)]


def _reranks(
    cfg: ModelConfig,
    pipeline: SemanticPipeline,
    view: StoredView,
    items: Sequence[RetrievalItem],
    batch: bool,
) -> list[StageSpend]:
    from eval_pipeline.providers.claude_rerank import MAX_OUTPUT_TOKENS, ClaudeReranker, render_candidates
    from eval_pipeline.providers.prompt_cache import minimum_cacheable_tokens
    from eval_pipeline.providers.voyage import VoyageReranker, rerank_documents

    reranker = pipeline.reranker
    if isinstance(reranker, ClaudeReranker):
        reranker.use_catalogue(view.catalogue)
    elif not isinstance(reranker, VoyageReranker):  # local: free, and no call
        return []
    model_id, stand_in = reranker.model_id, _typical(view.catalogue, cfg.candidate_depth)
    todo = [
        (item, stand_in if known is None else known)
        for item in items
        if (known := view.candidates.get(item.query)) is None
        or not reranker.cached(item.query, known, SELECTION_K, item.trial)
    ]
    cached, price = len(items) - len(todo), cfg.price(model_id)
    if isinstance(reranker, VoyageReranker):
        tokens = 0
        for item, shown in todo:
            documents = rerank_documents(shown)
            tokens += estimate_tokens(item.query) * len(documents) + sum(map(estimate_tokens, documents))
        usage = Usage(input_tokens=tokens)
        cost = cost_usd(usage, price)
        return [StageSpend("rerank", model_id, len(todo), cached, usage, cost, cost)]
    counting = StageSpend(
        "token counting", model_id, TOKEN_COUNT_CALLS, 0, note="the prefix, once a run: free"
    )
    if not todo:
        return [StageSpend("rerank", model_id, 0, cached), counting]
    # The first call writes the cacheable prefix when it is long enough, the others read it.
    prefix = estimate_tokens(reranker.prefix_text())
    turns = sum(
        estimate_tokens(render_candidates(i.query, shown, min(SELECTION_K, len(shown)))) for i, shown in todo
    )
    picks = sum(min(SELECTION_K, len(shown)) for _, shown in todo)
    minimum = minimum_cacheable_tokens(model_id)
    if minimum is not None and prefix >= minimum:
        usage = prefix_usage(prefix, turns, len(todo), batch)
        state = "cached: written once, then read"
    else:
        usage = Usage(input_tokens=turns + prefix * len(todo))
        state = f"below the minimum of {minimum} for caching" if minimum else "caching minimum unknown"
    typical = usage.model_copy(update={"output_tokens": OUTPUT_TOKENS_PER_PICK * picks})
    most = usage.model_copy(update={"output_tokens": MAX_OUTPUT_TOKENS * len(todo)})
    note = f"prefix ~{prefix:,} tokens, {state}"
    if batch:
        note += f"; the {len(todo)} requests as one message batch, half price, plus its status polls"
    cost, most_cost = cost_usd(typical, price, batch), cost_usd(most, price, batch)
    return [StageSpend("rerank", model_id, len(todo), cached, typical, cost, most_cost, note), counting]

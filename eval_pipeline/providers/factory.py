"""A model's semantic pipeline, built from its config: embedder, reranker, pacing, prices; or
the team's own system when the model assigns semantic to it."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.kb import Entity
from eval_pipeline.core.mechanisms.retrieval import SemanticRetrieval
from eval_pipeline.providers import static_embedder
from eval_pipeline.providers.base import Embedder, Reranker
from eval_pipeline.providers.cache import CacheMode, EmbeddingStore, ResponseCache
from eval_pipeline.providers.local_embedder import LocalMiniLMEmbedder
from eval_pipeline.providers.local_rerank import CosineReranker, HybridReranker
from eval_pipeline.providers.models import ModelConfig, require_keys
from eval_pipeline.providers.pricing import cost_usd
from eval_pipeline.providers.semantic_pipeline import SemanticPipeline
from eval_pipeline.providers.target import OnDone, PrepareReport, RetrievalItem, RetrievalPipeline

if TYPE_CHECKING:
    from eval_pipeline.core.inputs.loading import Banks
    from eval_pipeline.core.scoring.evaluation import MechanismOutput, Scope
    from eval_pipeline.providers.api_base import ApiAccess

Vendor = Literal["anthropic", "voyage"]


def _access(cfg: ModelConfig, env: Mapping[str, str], vendor: Vendor, per_min: float | None) -> ApiAccess:
    """How `cfg`'s stage reaches `vendor`'s API: its key and base URL from `env`, its pace."""
    from eval_pipeline.providers.api_base import ApiAccess
    from eval_pipeline.providers.ratelimit import RateLimiter

    key_env = cfg.anthropic_api_key_env if vendor == "anthropic" else cfg.voyage_api_key_env
    limiter = None if per_min is None else RateLimiter(per_min, cfg.concurrency)
    base_url = env.get(f"{vendor.upper()}_BASE_URL")
    return ApiAccess(env[key_env], base_url, limiter, policy=cfg.retry_policy, faults=cfg.faults)


def _embedder(cfg: ModelConfig, cache: ResponseCache, env: Mapping[str, str]) -> Embedder:
    embedder, _ = cfg.stages()
    if embedder.model_id == static_embedder.NAME:
        return static_embedder.StaticMiniLMEmbedder(cache.directory)
    if embedder.kind == "local":
        return LocalMiniLMEmbedder()
    from eval_pipeline.providers.voyage import VoyageEmbedder

    return VoyageEmbedder(embedder.model_id, _access(cfg, env, "voyage", embedder.rate_limit_per_min), cache)


def _reranker(
    cfg: ModelConfig,
    cache: ResponseCache,
    keyword_boosts: Mapping[str, Sequence[str]],
    env: Mapping[str, str],
) -> Reranker:
    _, reranker = cfg.stages()
    kind, model_id = reranker.kind, reranker.model_id
    if kind == "cosine":
        return CosineReranker(jitter=reranker.jitter, seed=reranker.seed)
    if kind == "hybrid":
        return HybridReranker(keyword_boosts, reranker.weights)
    if kind == "claude":
        from eval_pipeline.providers.claude_rerank import ClaudeReranker

        access = _access(cfg, env, "anthropic", cfg.rate_limit_per_min)
        return ClaudeReranker(model_id, access, cache, reranker.prompt_version)
    from eval_pipeline.providers.voyage import VoyageReranker

    access = _access(cfg, env, "voyage", cfg.rate_limit_per_min)
    return VoyageReranker(model_id, access, cache)


def rerank_mode(cfg: ModelConfig, batch: bool) -> Literal["online", "batch"]:
    """How `cfg`'s reranker answers when a run asks for batches: only Claude rerankers batch."""
    reranker = cfg.reranker  # None when the team's own system runs semantic
    return "batch" if batch and reranker is not None and reranker.kind == "claude" else "online"


def build_pipeline(
    cfg: ModelConfig,
    cache: ResponseCache,
    store: EmbeddingStore,
    keyword_boosts: Mapping[str, Sequence[str]],
    environ: Mapping[str, str] | None = None,
    batch: bool = False,
) -> RetrievalPipeline:
    """The pipeline `cfg` describes. Raises `ConfigError` (one line) when an API key is unset and
    `PricingError` when a stage's price is unknown, before any call is made. `environ` holds the
    API keys and base URLs (default: the process environment; the Dagster resource passes what it
    received through `EnvVar`). `batch`: rerank through Message Batches where the reranker can."""
    env = os.environ if environ is None else environ
    require_keys(cfg, env)
    if cfg.system is not None and cfg.system.runs(Mechanism.SEMANTIC):
        from eval_pipeline.providers.system_target import SystemPipeline, make_target

        target = make_target(cfg)
        return SystemPipeline(cfg.key, target, cfg.concurrency, cfg.candidate_depth)
    embedder, reranker = cfg.stages()
    return SemanticPipeline(
        cfg.key,
        _embedder(cfg, cache, env),
        _reranker(cfg, cache, keyword_boosts, env),
        store,
        cfg.concurrency,
        embed_cost=partial(cost_usd, price=cfg.price(embedder.model_id)),
        rerank_cost=partial(cost_usd, price=cfg.price(reranker.model_id)),
        batch_queries=True,
        batch=batch,
        candidate_depth=cfg.candidate_depth,
    )


def run_semantic(
    cfg: ModelConfig,
    entities: Sequence[Entity],
    items: Sequence[RetrievalItem],
    keyword_boosts: Mapping[str, Sequence[str]],
    cache_dir: Path,
    cache_mode: CacheMode = "use",
    environ: Mapping[str, str] | None = None,
    on_done: OnDone | None = None,
    *,
    batch: bool = False,
    on_prepared: Callable[[PrepareReport], None] | None = None,
) -> list[SemanticRetrieval]:
    """Every item through the model's pipeline (index the KB, then retrieve). When the KB cannot
    be indexed, every test errors with the reason: none is lost, none passes. `on_prepared`
    hears what indexing took (and whether the reranker's prefix can be cached)."""
    cache, store = ResponseCache(cache_dir, cache_mode), EmbeddingStore(cache_dir, cache_mode)
    pipeline = build_pipeline(cfg, cache, store, keyword_boosts, environ, batch)

    async def run() -> list[SemanticRetrieval]:
        try:
            prepared = await pipeline.prepare(entities)
        except Exception as exc:
            reason = f"indexing the KB failed: {exc}"
            return [errored(cfg.key, item.test_id, item.trial, reason) for item in items]
        if on_prepared is not None:
            on_prepared(prepared)
        return await pipeline.retrieve_many(items, on_done)

    return asyncio.run(run())


def system_outputs(cfg: ModelConfig, banks: Banks, scope: Scope) -> list[MechanismOutput]:
    """The team's system's answers for the state, pattern and always tests `cfg` assigns to it. A
    model without a system has none, and its run imports neither the system's clients nor the
    contract's models."""
    if cfg.system is None:
        return []
    from eval_pipeline.providers.system_target import run_system

    return run_system(cfg, banks, scope)


def errored(model: str, test_id: str, trial: int, reason: str) -> SemanticRetrieval:
    return SemanticRetrieval(test_id=test_id, model=model, trial=trial, status="errored", error=reason)

"""Provider concurrency pools: every run that calls a provider shares that provider's limit.

Dagster's `pool=` is fixed per asset, but which providers `semantic_retrievals` calls depends on
its model partition, so the asset claims its model's pools itself, through the same instance
slots and limits `pool=` uses (`concurrency: pools:` in dagster.yaml, or `dagster instance
concurrency set anthropic 1`; UI: Deployment > Concurrency). A pool bounds how many runs call a
provider at once; each run's client keeps its model's `rate_limit_per_min`. A run keeps its
slots until its limiter's bucket has drained, so the next run's opening burst cannot land on the
last second of this one's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg

from eval_pipeline.providers.models import ModelConfig
from eval_pipeline.runtime.dagster_private import InstanceConcurrencyContext
from eval_pipeline.runtime.run_monitor import wait_for_slot

# Which pool each API kind draws on; local kinds and http targets (the team's own service) none.
POOL_OF_KIND = {"voyage": "voyage", "claude": "anthropic"}


def provider_pools(cfg: ModelConfig) -> list[str]:
    """The pools a model's run claims, in one fixed order (two runs claiming two pools each
    always claim them in the same order, so they cannot hold one each and wait forever)."""
    return sorted({POOL_OF_KIND[kind] for kind in cfg.kinds if kind in POOL_OF_KIND})


def drain_s(cfg: ModelConfig) -> float:
    """How long the model's limiter takes to empty its bucket (providers.ratelimit.RateLimiter
    holds one second's share of the rate, at least one request)."""
    rate = cfg.rate_limit_per_min
    return 0.0 if not rate else max(1.0, rate / 60.0) * 60.0 / rate


@contextmanager
def provider_slots(context: dg.AssetExecutionContext, cfg: ModelConfig) -> Iterator[None]:
    """Hold a slot of each of the model's provider pools for the duration, and until the bucket
    drained (nothing for a local model, or when the instance sets no limit for its pools)."""
    pools = provider_pools(cfg)
    if not pools:
        yield
        return
    asset = context.asset_key.to_user_string()
    with InstanceConcurrencyContext(context.instance, context.run) as slots:
        held: list[str] = []
        try:
            for pool in pools:
                claim = f"{asset}[{pool}]"
                wait_for_slot(context, slots, pool, claim)
                held.append(claim)
            yield
            if any(slots.get_pool_info(pool) is not None for pool in pools):
                time.sleep(drain_s(cfg))
        finally:
            for claim in held:
                slots.free_step(claim)

"""Prices per model id and the cost of a call's usage.

An API model without a known price is an error (`PricingError`), never a silent $0: a cost report
that undercounts is worse than none. Local models carry explicit zero prices.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from eval_pipeline.core.errors import BadInput
from eval_pipeline.core.fileio import BadFile, read_input_text
from eval_pipeline.core.inputs.file_reader import parse_input_text
from eval_pipeline.core.mechanisms.retrieval import Usage

PRICES_ENV = "EVAL_PIPELINE_PRICES"
_PER_TOKEN = 1e-6
BATCH_DISCOUNT = 0.5  # Message Batches bill every kind of token at half the online price


class PricingError(BadInput):
    """A price is unknown, or a price file is unreadable or invalid."""


class Price(BaseModel):
    """USD per million tokens (embedding and rerank APIs bill input tokens only). A rate left unset
    means "this model does not bill that kind of token": usage of that kind raises, never is free."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True, allow_inf_nan=False)

    input: float = Field(ge=0)
    output: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0, description="5-minute TTL cache writes")
    cache_write_1h: float | None = Field(default=None, ge=0, description="1-hour TTL cache writes")
    cache_read: float | None = Field(default=None, ge=0)


FREE = Price(input=0.0, output=0.0, cache_write=0.0, cache_write_1h=0.0, cache_read=0.0)


def claude_price(input: float, output: float) -> Price:
    """Claude's cache rates follow from the input rate: 5-minute writes 1.25x, 1-hour writes 2x,
    reads 0.1x (platform.claude.com prompt-caching pricing)."""
    return Price(
        input=input,
        output=output,
        cache_write=input * 1.25,
        cache_write_1h=input * 2,
        cache_read=round(input * 0.1, 6),
    )


# List prices at time of writing; override with EVAL_PIPELINE_PRICES (or `prices:` in models.yaml).
# A dated snapshot id costs what its alias costs.
BUILTIN_PRICES: dict[str, Price] = {
    **dict.fromkeys(("claude-haiku-4-5", "claude-haiku-4-5-20251001"), claude_price(1.0, 5.0)),
    **dict.fromkeys(("claude-sonnet-4-5", "claude-sonnet-4-5-20250929"), claude_price(3.0, 15.0)),
    # Opus 5.5 lists its cache reads at 0.05x input, not 0.1x.
    "claude-opus-5-5": claude_price(4.0, 20.0).model_copy(update={"cache_read": 0.20}),
    **dict.fromkeys(("claude-opus-4-5", "claude-opus-4-5-20251101"), claude_price(5.0, 25.0)),
    "voyage-3.5": Price(input=0.06),
    "voyage-3.5-lite": Price(input=0.02),
    "rerank-2.5": Price(input=0.05),
    "rerank-2.5-lite": Price(input=0.02),
    # Local models: free by construction, stated explicitly.
    **dict.fromkeys(("local-minilm-l6-int8", "static-minilm-l6", "cosine", "hybrid"), FREE),
}


def _rate(rate: float | None, tokens: int, kind: str) -> float:
    if tokens == 0:
        return 0.0
    if rate is None:
        raise PricingError(f"usage has {tokens} {kind} tokens but the price has no {kind} rate")
    return rate * tokens * _PER_TOKEN


def usd(amount: float) -> str:
    """$0.42; a fraction of a cent keeps four decimals rather than reading as nothing."""
    return f"${amount:.2f}" if amount == 0 or amount >= 0.01 else f"${amount:.4f}"


def cost_usd(usage: Usage, price: Price, batch: bool = False) -> float:
    """Cost of `usage`; cache writes (per TTL) and reads are billed at their own rates, not as
    input; `batch`: billed through a message batch, at the batch discount."""
    long_writes = usage.cache_creation_1h_input_tokens
    return (
        _rate(price.input, usage.input_tokens, "input")
        + _rate(price.output, usage.output_tokens, "output")
        + _rate(price.cache_write, usage.cache_creation_input_tokens - long_writes, "cache_write")
        + _rate(price.cache_write_1h, long_writes, "cache_write_1h")
        + _rate(price.cache_read, usage.cache_read_input_tokens, "cache_read")
    ) * (BATCH_DISCOUNT if batch else 1.0)


def prefix_usage(prefix_tokens: int, turn_tokens: int, calls: int, batch: bool) -> Usage:
    """The input of `calls` requests sharing one cached prefix: the first writes it (a batch with
    the 1-hour TTL, as its requests run over hours), the others read it; `turn_tokens` is the
    requests' own input together."""
    return Usage(
        input_tokens=turn_tokens,
        cache_creation_input_tokens=prefix_tokens,
        cache_creation_1h_input_tokens=prefix_tokens if batch else 0,
        cache_read_input_tokens=prefix_tokens * (calls - 1),
    )


def load_price_overrides(environ: Mapping[str, str] | None = None) -> dict[str, Price]:
    """Prices from the JSON file named by $EVAL_PIPELINE_PRICES (none when it is unset)."""
    name = (os.environ if environ is None else environ).get(PRICES_ENV, "").strip()
    if not name:
        return {}
    path = Path(name)
    try:
        raw = parse_input_text(read_input_text(path), ".json")  # JSON whatever its name
    except BadFile as exc:
        raise PricingError(f"{PRICES_ENV} file {path}: {exc.message}") from None
    if not isinstance(raw, dict):
        raise PricingError(f"{PRICES_ENV} file {path}: expected an object of model id -> price")
    out: dict[str, Price] = {}
    for model_id, fields in raw.items():
        try:
            out[model_id] = Price.model_validate(fields)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'price'}: {e['msg']}" for e in exc.errors()
            )
            raise PricingError(f"{PRICES_ENV} file {path}: model '{model_id}': {problems}") from exc
    return out


def lookup_price(model_id: str, *layers: Mapping[str, Price]) -> Price:
    """The first layer that prices `model_id` wins; the built-in table is the last resort."""
    for layer in (*layers, BUILTIN_PRICES):
        if model_id in layer:
            return layer[model_id]
    raise PricingError(
        f"no price known for model '{model_id}': add it under `prices:` in models.yaml "
        f"or to the JSON file named by {PRICES_ENV}"
    )

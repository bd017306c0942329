"""The models file (`models.yaml`): named retrieval configurations an evaluation can run.

A model is an embedder plus a reranker, with the rate limit, concurrency, trials and prices that
go with them. Loading validates everything up front and reports problems as one line naming the
file, the model key and the field, so a bad config fails before any call is made.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from eval_pipeline.providers.local_embedder import NAME as LOCAL_EMBEDDER_NAME
from eval_pipeline.providers.local_rerank import HybridWeights
from eval_pipeline.providers.pricing import Price, PricingError, load_price_overrides, lookup_price

EmbedderKind = Literal["local", "voyage", "http"]
RerankerKind = Literal["cosine", "hybrid", "claude", "voyage", "http"]

SCHEMA_VERSION = 1
# The specification's pace for the LLM reranker: one call every 1.25 s.
DEFAULT_RERANK_RATE_PER_MIN = 48.0
_API_KINDS = frozenset({"voyage", "claude"})
_LOCAL_MODEL_IDS = {"local": LOCAL_EMBEDDER_NAME, "cosine": "cosine", "hybrid": "hybrid"}


class ConfigError(Exception):
    """The models file or the environment cannot support a requested model (one-line message)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _resolve_model_id(kind: str, model_id: str, where: str) -> str:
    """Local kinds run one model each; API kinds must name theirs."""
    if kind in _LOCAL_MODEL_IDS:
        local = _LOCAL_MODEL_IDS[kind]
        if model_id and model_id != local:
            raise ValueError(f"{where}.model_id: kind '{kind}' only runs '{local}'")
        return local
    if kind == "http":
        return model_id or "http"
    if not model_id:
        raise ValueError(f"{where}.model_id: required for kind '{kind}'")
    return model_id


class EmbedderConfig(_Strict):
    kind: EmbedderKind
    model_id: str = ""
    # None: no client-side limit (the provider's 429s are still retried by its client).
    rate_limit_per_min: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _fill_model_id(self) -> Self:
        self.model_id = _resolve_model_id(self.kind, self.model_id, "embedder")
        return self


class RerankerConfig(_Strict):
    kind: RerankerKind
    model_id: str = ""
    prompt_version: str = Field(default="rerank-v2", min_length=1)
    weights: HybridWeights | None = None
    jitter: float = Field(
        default=0.0, ge=0, le=1, description="cosine only: seeded noise on similarities (noise studies)"
    )
    seed: int = Field(default=0, description="cosine only: the jitter's seed")

    @model_validator(mode="after")
    def _check(self) -> Self:
        self.model_id = _resolve_model_id(self.kind, self.model_id, "reranker")
        if self.weights is not None and self.kind != "hybrid":
            raise ValueError("reranker.weights: only a hybrid reranker takes weights")
        if (self.jitter or self.seed) and self.kind != "cosine":
            raise ValueError("reranker.jitter/seed: only a cosine reranker takes them")
        return self


class RetryConfig(_Strict):
    """Retries of a failed API or HTTP call (backoff doubles per retry, honouring retry-after)."""

    max_attempts: int = Field(default=5, ge=1, le=20)
    backoff_s: float = Field(default=1.0, ge=0, le=60)


class HttpConfig(_Strict):
    url: str = Field(pattern=r"^https?://\S+$")
    timeout_s: float = Field(default=30.0, gt=0)


class ModelConfig(_Strict):
    key: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$", max_length=64)
    description: str = ""
    enabled: bool = True
    automate: bool = Field(
        default=False, description="Paid models only: let Dagster's automation evaluate it daily"
    )
    cost_incurring: bool = Field(
        default=False, description="Derived from the kinds unless set; API models always are"
    )
    embedder: EmbedderConfig
    reranker: RerankerConfig
    rate_limit_per_min: float | None = Field(
        default=None, gt=0, description="Reranker requests/min; 48 by default for API rerankers"
    )
    concurrency: int = Field(default=4, ge=1, le=64)
    trials: int = Field(default=1, ge=1, le=20)
    prices: dict[str, Price] = Field(default_factory=dict, description="model id -> Price")
    http: HttpConfig | None = None
    retry: RetryConfig = Field(default_factory=RetryConfig)
    anthropic_api_key_env: str = "ANTHROPIC_API_KEY"
    voyage_api_key_env: str = "VOYAGE_API_KEY"

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset({self.embedder.kind, self.reranker.kind})

    @property
    def automated(self) -> bool:
        """Whether automation may evaluate this model: enabled, and free or explicitly opted in."""
        return self.enabled and (self.automate or not self.cost_incurring)

    @property
    def uses_api(self) -> bool:
        return bool(self.kinds & _API_KINDS)

    @model_validator(mode="after")
    def _derive_and_check(self) -> Self:
        is_http = self.embedder.kind == "http"
        if is_http != (self.reranker.kind == "http"):
            raise ValueError("embedder.kind/reranker.kind: 'http' is a whole pipeline, use it for both")
        if is_http != (self.http is not None):
            raise ValueError("http: required exactly when the kinds are 'http'")
        if "cost_incurring" not in self.model_fields_set:
            self.cost_incurring = self.uses_api
        elif self.uses_api and not self.cost_incurring:
            raise ValueError("cost_incurring: a model that calls a paid API cannot be false")
        if "rate_limit_per_min" not in self.model_fields_set and self.reranker.kind in _API_KINDS:
            self.rate_limit_per_min = DEFAULT_RERANK_RATE_PER_MIN
        if self.reranker.kind == "claude" and self.rate_limit_per_min is None:
            raise ValueError("rate_limit_per_min: an LLM reranker is always rate limited")
        return self

    def price(self, model_id: str) -> Price:
        """This model's price for `model_id` (its own `prices`, then the built-in table)."""
        return lookup_price(model_id, self.prices)


def missing_keys(cfg: ModelConfig, environ: Mapping[str, str] | None = None) -> list[str]:
    """Names of the API-key environment variables `cfg` needs that are unset or empty."""
    env = os.environ if environ is None else environ
    needed = []
    if "claude" in cfg.kinds:
        needed.append(cfg.anthropic_api_key_env)
    if "voyage" in cfg.kinds:
        needed.append(cfg.voyage_api_key_env)
    return [name for name in needed if not env.get(name)]


def require_keys(cfg: ModelConfig, environ: Mapping[str, str] | None = None) -> None:
    missing = missing_keys(cfg, environ)
    if missing:
        raise ConfigError(
            f"model '{cfg.key}' needs the environment variable {' and '.join(missing)} "
            "(set it, or pick a model that does not call that API)"
        )


def _one_line(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors():
        msg = str(err["msg"]).removeprefix("Value error, ")
        loc = ".".join(str(p) for p in err["loc"])
        problems.append(f"field '{loc}': {msg}" if loc else msg)
    return "; ".join(problems)


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the models file: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        problem = getattr(exc, "problem", None)
        detail = f": {problem}" if problem else ""
        raise ConfigError(f"{path}: not valid YAML{line}{detail}") from exc


def _model_entries(path: Path, doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict) or not isinstance(doc.get("models"), dict):
        raise ConfigError(f"{path}: expected a mapping with a 'models:' mapping of key -> model")
    version = doc.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise ConfigError(f"{path}: schema_version {version!r} is not {SCHEMA_VERSION}")
    unknown = sorted(set(doc) - {"schema_version", "models"})
    if unknown:
        raise ConfigError(f"{path}: unknown top-level field(s) {', '.join(unknown)}")
    return dict(doc["models"])


def _build(path: Path, key: str, body: Any, overrides: Mapping[str, Price]) -> ModelConfig:
    if not isinstance(body, dict):
        raise ConfigError(f"{path}: model '{key}': expected a mapping of fields")
    try:
        cfg = ModelConfig.model_validate({**body, "key": key})
    except ValidationError as exc:
        raise ConfigError(f"{path}: model '{key}': {_one_line(exc)}") from exc
    if not cfg.uses_api:
        return cfg
    ids = {cfg.embedder.model_id, cfg.reranker.model_id}
    cfg.prices = {**cfg.prices, **{m: p for m, p in overrides.items() if m in ids}}
    for model_id in sorted(ids):
        try:
            cfg.price(model_id)
        except PricingError as exc:
            raise ConfigError(f"{path}: model '{key}': field 'prices': {exc}") from exc
    return cfg


def load_models(path: Path, price_overrides: Mapping[str, Price] | None = None) -> dict[str, ModelConfig]:
    """All models in file order. Prices: `price_overrides` (default: $EVAL_PIPELINE_PRICES) win
    over the file's `prices:`, which win over the built-in table; every API model must be priced.
    """
    try:
        overrides = load_price_overrides() if price_overrides is None else price_overrides
    except PricingError as exc:
        raise ConfigError(str(exc)) from exc
    entries = _model_entries(path, _read_yaml(path))
    return {str(key): _build(path, str(key), body, overrides) for key, body in entries.items()}

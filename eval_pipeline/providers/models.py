"""The models file (`models.yaml`): named retrieval configurations an evaluation can run.

A model is an embedder plus a reranker with their pacing, trials and prices, and may hand any of
the four mechanisms to the team's own system (`system:`, over HTTP or a Python entry point)
instead of the built-in reference. Loading validates everything up front: a problem is one line
naming the file, the model key and the field, before any call is made.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictBool,
    ValidationError,
    field_serializer,
    model_serializer,
    model_validator,
)

from eval_pipeline.core.errors import BadInput
from eval_pipeline.core.fileio import BadFile
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.file_reader import load_input
from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.inputs.stage_depths import CANDIDATE_K
from eval_pipeline.core.scoring.aggregate import REFERENCE
from eval_pipeline.core.verdicts.project_gates import ProjectGates
from eval_pipeline.providers import local_embedder, static_embedder
from eval_pipeline.providers.circuit import BreakerSettings
from eval_pipeline.providers.local_rerank import HybridWeights
from eval_pipeline.providers.model_keys import MODEL_KEY_MAX, MODEL_KEY_PATTERN
from eval_pipeline.providers.pricing import Price, PricingError, load_price_overrides, lookup_price
from eval_pipeline.providers.url_redaction import redact_url

if TYPE_CHECKING:
    from eval_pipeline.providers.ratelimit import RetryPolicy

EmbedderKind = Literal["local", "voyage"]
RerankerKind = Literal["cosine", "hybrid", "claude", "voyage"]
SystemKind = Literal["http", "python"]

SCHEMA_VERSION = 1
# Voyage reranks at most 1000 documents a call; no stage here is built for more.
MAX_CANDIDATE_DEPTH = 1000
# The specification's pace for the LLM reranker: one call every 1.25 s.
DEFAULT_RERANK_RATE_PER_MIN = 48.0
_API_KINDS = frozenset({"voyage", "claude"})
_LOCAL_MODEL_IDS = {"local": local_embedder.NAME, "cosine": "cosine", "hybrid": "hybrid"}
# Other models a local kind may name instead of its default.
_LOCAL_ALTERNATIVES = {"local": frozenset({static_embedder.NAME})}


class ConfigError(BadInput):
    """The models file or the environment cannot support a requested model (one-line message)."""


class _Strict(BaseModel):
    # allow_inf_nan: a number written as text ("1e400", "nan") must not pass as infinity or NaN.
    model_config = ConfigDict(defer_build=True, extra="forbid", allow_inf_nan=False)


def _resolve_model_id(kind: str, model_id: str, where: str) -> str:
    """Local kinds run one model each; API kinds must name theirs."""
    if kind in _LOCAL_MODEL_IDS:
        local = _LOCAL_MODEL_IDS[kind]
        allowed = {local, *_LOCAL_ALTERNATIVES.get(kind, ())}
        if model_id and model_id not in allowed:
            names = " or ".join(sorted(map(repr, allowed)))
            raise ValueError(f"{where}.model_id: kind '{kind}' runs {names}")
        return model_id or local
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


class WaitLimits(FrozenModel):
    """`waits:`: caps on every wait a provider may start (see `ratelimit.WaitBudget`)."""

    max_wait_s: float = Field(
        default=120.0, gt=0, le=86_400, description="Longest single wait (retry-after, backoff, slot, poll)"
    )
    run_deadline_s: float = Field(
        default=7200.0, gt=0, le=7 * 86_400, description="No wait may end after this long into the run"
    )


@dataclass(frozen=True)
class FaultSettings:
    """A model's `waits:` and `breaker:` (defaults when absent)."""

    waits: WaitLimits = field(default_factory=WaitLimits)
    breaker: BreakerSettings = field(default_factory=BreakerSettings)


_ENTRYPOINT = r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$"
Entrypoint = Annotated[str, Field(pattern=_ENTRYPOINT)]


class SystemConfig(_Strict):
    """The team's own system, and the mechanisms it answers (the rest use the reference)."""

    kind: SystemKind
    # Kept whole to call; dumped and shown redacted (`_shown_url`), and left out of the repr.
    url: str | None = Field(default=None, pattern=r"^https?://\S+$", description="http only", repr=False)
    entrypoint: Entrypoint | dict[Mechanism, Entrypoint] | None = Field(
        default=None,
        description="python only: 'package.module:attr', or one per mechanism",
    )
    timeout_s: float = Field(default=30.0, gt=0, description="Per call")
    mechanisms: list[Mechanism] = Field(default_factory=lambda: list(Mechanism), min_length=1)

    @model_validator(mode="after")
    def _check(self) -> Self:
        if (self.kind == "http") != (self.url is not None):
            raise ValueError("system.url: required exactly when system.kind is 'http'")
        if (self.kind == "python") != (self.entrypoint is not None):
            raise ValueError("system.entrypoint: required exactly when system.kind is 'python'")
        if isinstance(self.entrypoint, dict) and set(self.entrypoint) != set(self.mechanisms):
            raise ValueError("system.entrypoint: name one entry point for each of system.mechanisms")
        return self

    def runs(self, mechanism: Mechanism) -> bool:
        return mechanism in self.mechanisms

    @field_serializer("url")
    def _shown_url(self, url: str | None) -> str | None:
        """Every dump (results.json, storage documents, metadata, fingerprints) keeps the URL
        without its credentials and secret-looking query values."""
        return None if url is None else redact_url(url)


def _legacy_http(data: Any) -> Any:
    """The earlier form of a whole-pipeline HTTP service (`embedder/reranker: {kind: http}` plus
    `http: {url, timeout_s}`) is the team's system running the semantic mechanism."""
    if not isinstance(data, dict):
        return data
    # A stage may come as a mapping (a models file) or as a built config (code).
    stages = [data.get(stage) for stage in ("embedder", "reranker")]
    kinds = [(s.get("kind") if isinstance(s, dict) else getattr(s, "kind", None)) == "http" for s in stages]
    if not any(kinds) and "http" not in data:
        return data
    if not all(kinds):
        raise ValueError("embedder.kind/reranker.kind: 'http' is a whole pipeline, use it for both")
    if not isinstance(data.get("http"), dict):
        raise ValueError("http: required exactly when the kinds are 'http'")
    if "system" in data:
        raise ValueError("http: give either system: or the older kind: http form, not both")
    rest = {k: v for k, v in data.items() if k not in ("embedder", "reranker", "http")}
    return {**rest, "system": {"kind": "http", **data["http"], "mechanisms": ["semantic"]}}


class ModelConfig(_Strict):
    key: str = Field(pattern=MODEL_KEY_PATTERN, max_length=MODEL_KEY_MAX)
    description: str = ""
    enabled: StrictBool = True
    automate: StrictBool = Field(
        default=False, description="Paid models only: let Dagster's automation evaluate it daily"
    )
    cost_incurring: StrictBool = Field(
        default=False, description="Derived from the kinds unless set; API models always are"
    )
    embedder: EmbedderConfig | None = Field(default=None, description="Unless system: runs semantic")
    reranker: RerankerConfig | None = Field(default=None, description="Unless system: runs semantic")
    rate_limit_per_min: float | None = Field(
        default=None, gt=0, description="Reranker requests/min; 48 by default for API rerankers"
    )
    concurrency: int = Field(default=4, ge=1, le=64)
    candidate_depth: int = Field(
        default=CANDIDATE_K,
        ge=1,
        le=MAX_CANDIDATE_DEPTH,
        description="How many candidates the embedding stage keeps for the reranker (and R@100 sees)",
    )
    trials: int = Field(default=1, ge=1, le=20)
    reproducible: bool = Field(
        default=True,
        description="Whether the same inputs always give the same answer. Derived unless set: only "
        "this package's local stages (no remote service, no team code whose source no fingerprint "
        "covers). false: `run` re-tries each semantic regression before it may fail a gate, and "
        "never lets a stored evaluation stand for a rerun",
    )
    prices: dict[str, Price] = Field(default_factory=dict, description="model id -> Price")
    system: SystemConfig | None = Field(default=None, description="The team's own system")
    retry: RetryConfig = Field(default_factory=RetryConfig)
    waits: WaitLimits = Field(default_factory=WaitLimits, description="Caps on every wait")
    breaker: BreakerSettings = Field(
        default_factory=BreakerSettings, description="When a remote service is declared down"
    )
    anthropic_api_key_env: str = "ANTHROPIC_API_KEY"
    voyage_api_key_env: str = "VOYAGE_API_KEY"

    @model_serializer(mode="wrap")
    def _identity(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # The default depth is left out, so configurations written before the field existed keep
        # their identity; any other depth is part of it (a change of depth is a config change).
        data: dict[str, Any] = handler(self)
        if data.get("candidate_depth") == CANDIDATE_K:
            del data["candidate_depth"]
        return data

    @property
    def faults(self) -> FaultSettings:
        return FaultSettings(self.waits, self.breaker)

    # Imported here: only a model that calls a remote service needs the retry machinery (tenacity).
    @property
    def retry_policy(self) -> RetryPolicy:
        from eval_pipeline.providers.ratelimit import RetryPolicy

        return RetryPolicy(max_attempts=self.retry.max_attempts, backoff_s=self.retry.backoff_s)

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset(stage.kind for stage in (self.embedder, self.reranker) if stage is not None)

    @property
    def waits_on_network(self) -> bool:
        """Whether its runs mostly wait on a remote service (an API, the team's HTTP system) rather
        than on this machine's CPU: what makes running it beside another model pay."""
        return self.uses_api or (self.system is not None and self.system.kind == "http")

    def implementation(self, mechanism: Mechanism) -> str:
        """What produces `mechanism`'s bank: the team's system kind, or the reference."""
        return self.system.kind if self.system is not None and self.system.runs(mechanism) else REFERENCE

    @property
    def implementations(self) -> dict[Mechanism, str]:
        return {m: self.implementation(m) for m in Mechanism}

    @property
    def system_mechanisms(self) -> list[Mechanism]:
        """The mechanisms the team's system answers, in bank order."""
        return [m for m in Mechanism if self.implementation(m) != REFERENCE]

    def stages(self) -> tuple[EmbedderConfig, RerankerConfig]:
        """The built-in semantic pipeline's embedder and reranker (validation ensures both
        exist unless the team's system runs semantic)."""
        if self.embedder is None or self.reranker is None:
            raise ConfigError(
                f"model '{self.key}': the team's system runs semantic; it has no built-in stages"
            )
        return self.embedder, self.reranker

    @property
    def automated(self) -> bool:
        """Whether automation may evaluate this model: enabled, and free or explicitly opted in."""
        return self.enabled and (self.automate or not self.cost_incurring)

    @property
    def uses_api(self) -> bool:
        return bool(self.kinds & _API_KINDS)

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        return _legacy_http(data)

    @model_validator(mode="after")
    def _derive_and_check(self) -> Self:
        by_system = self.implementation(Mechanism.SEMANTIC) != REFERENCE
        for name, stage in (("embedder", self.embedder), ("reranker", self.reranker)):
            if by_system and stage is not None:
                raise ValueError(f"{name}: the team's system runs semantic (system.mechanisms); remove it")
            if not by_system and stage is None:
                raise ValueError(f"{name}: required unless system.mechanisms includes semantic")
        if "reproducible" not in self.model_fields_set:
            self.reproducible = self.system is None and not self.kinds & _API_KINDS
        if "cost_incurring" not in self.model_fields_set:
            self.cost_incurring = self.uses_api
        elif self.uses_api and not self.cost_incurring:
            raise ValueError("cost_incurring: a model that calls a paid API cannot be false")
        reranker_kind = self.reranker.kind if self.reranker is not None else None
        if "rate_limit_per_min" not in self.model_fields_set and reranker_kind in _API_KINDS:
            self.rate_limit_per_min = DEFAULT_RERANK_RATE_PER_MIN
        if reranker_kind == "claude" and self.rate_limit_per_min is None:
            raise ValueError("rate_limit_per_min: an LLM reranker is always rate limited")
        return self

    def price(self, model_id: str) -> Price:
        """This model's price for `model_id` (its own `prices`, then the built-in table)."""
        return lookup_price(model_id, self.prices)


def missing_keys(cfg: ModelConfig, environ: Mapping[str, str] | None = None) -> list[str]:
    """Names of the API-key environment variables `cfg` needs that are unset or empty."""
    env = os.environ if environ is None else environ
    needed = {"claude": cfg.anthropic_api_key_env, "voyage": cfg.voyage_api_key_env}
    return [name for kind, name in needed.items() if kind in cfg.kinds and not env.get(name)]


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


# The last parse of each models file, with the file's identity and last change: a graph run looks
# a model up many times and reads the file again only once it changed.
_PARSED: dict[str, tuple[tuple[int, int, int, int], Any]] = {}


def _read_yaml(path: Path) -> Any:
    try:
        seen = path.stat()
    except OSError:
        return _parse_yaml(path)  # the reader names what is wrong
    where, mark = str(path.resolve()), (seen.st_dev, seen.st_ino, seen.st_size, seen.st_mtime_ns)
    kept = _PARSED.get(where)
    if kept is None or kept[0] != mark:
        kept = _PARSED[where] = (mark, _parse_yaml(path))
    return copy.deepcopy(kept[1])


def _parse_yaml(path: Path) -> Any:
    try:
        return load_input(path)
    except BadFile as exc:
        line = f":{exc.line}" if exc.line is not None else ""
        # A value's path is models.<key>.<field>: name the model as every other problem does.
        section, _, rest = exc.field.partition(".")
        key, _, fld = rest.partition(".")
        where = f" field '{exc.field}':" if exc.field != "-" else ""
        if section == "models" and fld:
            where = f" model '{key}': field '{fld}':"
        raise ConfigError(f"{path}{line}:{where} {exc.message}") from None


def legacy_notice(path: Path, cfg: ModelConfig) -> str:
    """What the older `kind: http` form means, said once at load, with its replacement."""
    url = redact_url(cfg.system.url) if cfg.system is not None and cfg.system.url is not None else ""
    reference = ", ".join(m.value for m in Mechanism if cfg.implementation(m) == REFERENCE)
    return (
        f"{path}: model '{cfg.key}': the older 'embedder/reranker: {{kind: http}}' form is read as "
        f"'system: {{kind: http, url: {url}, mechanisms: [semantic]}}': your service answers semantic "
        f"only and {reference} use eval_pipeline's reference rules; write that system: line instead "
        "(add mechanisms your service answers)"
    )


def _build(
    path: Path, key: str, body: Any, overrides: Mapping[str, Price], notices: list[str]
) -> ModelConfig:
    if not isinstance(body, dict):
        raise ConfigError(f"{path}: model '{key}': expected a mapping of fields")
    try:
        cfg = ModelConfig.model_validate({**body, "key": key})
    except ValidationError as exc:
        raise ConfigError(f"{path}: model '{key}': {_one_line(exc)}") from exc
    if "http" in body:
        notices.append(legacy_notice(path, cfg))
    if not cfg.uses_api:
        return cfg
    embedder, reranker = cfg.stages()
    ids = {embedder.model_id, reranker.model_id}
    cfg.prices = {**cfg.prices, **{m: p for m, p in overrides.items() if m in ids}}
    for model_id in sorted(ids):
        try:
            cfg.price(model_id)
        except PricingError as exc:
            raise ConfigError(f"{path}: model '{key}': field 'prices': {exc}") from exc
    return cfg


@dataclass(frozen=True)
class ModelsFile:
    """What a models file holds: every model in file order, and the project's gates."""

    models: dict[str, ModelConfig]
    gates: ProjectGates


def read_models_file(
    path: Path, price_overrides: Mapping[str, Price] | None = None, notices: list[str] | None = None
) -> ModelsFile:
    """The models and the gates from one read. Prices: `price_overrides` (default:
    $EVAL_PIPELINE_PRICES) win over the file's `prices:`, which win over the built-in table; every
    API model must be priced. A model in an older form that loads as a newer one adds a line to
    `notices`."""
    try:
        overrides = load_price_overrides() if price_overrides is None else price_overrides
    except PricingError as exc:
        raise ConfigError(str(exc)) from exc
    doc = _read_yaml(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("models"), dict):
        raise ConfigError(f"{path}: expected a mapping with a 'models:' mapping of key -> model")
    version = doc.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise ConfigError(f"{path}: schema_version {version!r} is not {SCHEMA_VERSION}")
    unknown = sorted(set(doc) - {"schema_version", "models", "gates"})
    if unknown:
        raise ConfigError(f"{path}: unknown top-level field(s) {', '.join(unknown)}")
    said = [] if notices is None else notices
    models = {str(key): _build(path, str(key), body, overrides, said) for key, body in doc["models"].items()}
    return ModelsFile(models, _gates(path, doc))


def load_models(
    path: Path, price_overrides: Mapping[str, Price] | None = None, notices: list[str] | None = None
) -> dict[str, ModelConfig]:
    """All models in file order, as `read_models_file` reads them."""
    return read_models_file(path, price_overrides, notices).models


def load_gates(path: Path) -> ProjectGates:
    """The project's gates: the models file's `gates:` section (every gate at its default when the
    file or the section is absent); a bad value is one line naming the file and the field."""
    return _gates(path, _read_yaml(path)) if path.exists() else ProjectGates()


def _gates(path: Path, doc: Any) -> ProjectGates:
    section = doc.get("gates") if isinstance(doc, dict) else None
    if section is None:
        return ProjectGates()
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: gates: expected a mapping of gate -> value")
    try:
        return ProjectGates.model_validate(section)
    except ValidationError as exc:
        raise ConfigError(f"{path}: gates: {_one_line(exc)}") from None

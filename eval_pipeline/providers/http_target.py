"""Evaluate your own retrieval service over HTTP.

The contract (also in docs/http_target.md): the pipeline POSTs one JSON object per test

    {"message": str, "user_type": str | null, "user_state": {...},
     "top_k_candidates": 15, "top_k": 6}

and expects 200 with

    {"candidates": [{"entity_id": str, "score": float}, ...],        # embedding stage, best first
     "selections": [{"entity_id": str, "reason": str?}, ...],        # final picks, best first
     "triggered_handlers": [entity_id, ...],                         # optional, default []
     "pattern_matches": [{"entity_id": str, "pattern": str?, "matched_text": str?}, ...],
     "always_loaded": [entity_id, ...],                              # optional, default []
     "usage": {"input_tokens", "output_tokens", "cache_creation_input_tokens",
               "cache_read_input_tokens", "cost_usd"}?}              # optional, all optional

Unknown response fields are ignored. `selections` must be distinct and at most `top_k` long.
Failures are retried by the shared policy (429/500/502/503/504/529 honouring `retry-after`,
timeouts, connection errors, unparseable JSON); a response that parses but breaks the contract is
not retried: it errors the test with the reason.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from eval_pipeline.core.inputs.kb import Entity
from eval_pipeline.core.mechanisms.retrieval import (
    CANDIDATE_K,
    SELECTION_K,
    Candidate,
    Selection,
    SemanticRetrieval,
    Usage,
)
from eval_pipeline.providers.base import ProviderError
from eval_pipeline.providers.ratelimit import (
    REAL_CLOCK,
    Clock,
    Failure,
    LoopLocal,
    RateLimiter,
    RetryPolicy,
    call_with_retry,
    failure_for_status,
)
from eval_pipeline.providers.target import OnDone, PrepareReport, RetrievalItem, retrieve_all


class _Contract(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class TargetCandidate(_Contract):
    entity_id: str
    score: float


class TargetSelection(_Contract):
    entity_id: str
    reason: str | None = None


class PatternMatch(_Contract):
    entity_id: str
    pattern: str | None = None
    matched_text: str | None = None


class TargetUsage(_Contract):
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cache_creation_input_tokens: int = Field(default=0, ge=0)
    cache_read_input_tokens: int = Field(default=0, ge=0)
    cost_usd: float = Field(default=0.0, ge=0)

    def as_usage(self) -> Usage:
        return Usage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens,
        )


class TargetResponse(_Contract):
    candidates: list[TargetCandidate]
    selections: list[TargetSelection] = Field(max_length=SELECTION_K)
    triggered_handlers: list[str] = Field(default_factory=list)
    pattern_matches: list[PatternMatch] = Field(default_factory=list)
    always_loaded: list[str] = Field(default_factory=list)
    usage: TargetUsage | None = None


class _HttpStatus(Exception):
    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


class _Unparseable(Exception):
    pass


def classify(exc: BaseException) -> Failure | None:
    if isinstance(exc, httpx.TimeoutException):
        return Failure("timeout", retryable=True)
    if isinstance(exc, httpx.TransportError):
        return Failure("connection error", retryable=True)
    if isinstance(exc, _HttpStatus):
        response = exc.response
        return failure_for_status(response.status_code, response.headers, response.text[:200])
    if isinstance(exc, _Unparseable):
        return Failure("malformed response", retryable=True)
    return None


def parse_response(payload: object) -> TargetResponse:
    """Validate a response body against the contract; ProviderError names the first problem."""
    try:
        response = TargetResponse.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "response"
        raise ProviderError(f"target response breaks the contract: {where}: {first['msg']}") from None
    ids = [s.entity_id for s in response.selections]
    if len(set(ids)) != len(ids):
        raise ProviderError("target response breaks the contract: duplicate selections")
    return response


class HttpTarget:
    """A client for one retrieval service implementing the contract."""

    def __init__(
        self,
        url: str,
        timeout_s: float,
        *,
        limiter: RateLimiter | None = None,
        clock: Clock | None = None,
        policy: RetryPolicy | None = None,
    ) -> None:
        self.url = url
        self._limiter = limiter
        self.clock = clock or (limiter.clock if limiter is not None else REAL_CLOCK)
        self._policy = policy or RetryPolicy()
        self._client = LoopLocal(
            lambda: httpx.AsyncClient(timeout=timeout_s), close=lambda client: client.aclose()
        )

    def __repr__(self) -> str:  # a URL may embed credentials
        return "HttpTarget(...)"

    async def aclose(self) -> None:
        """Close this loop's connections now (they are closed when the loop ends anyway)."""
        await self._client.aclose()

    async def call(
        self, message: str, user_type: str | None, user_state: Mapping[str, Any]
    ) -> TargetResponse:
        body = {
            "message": message,
            "user_type": user_type,
            "user_state": dict(user_state),
            "top_k_candidates": CANDIDATE_K,
            "top_k": SELECTION_K,
        }

        async def attempt() -> object:
            response = await self._client.get().post(self.url, json=body)
            if response.status_code != 200:
                raise _HttpStatus(response)
            try:
                return json.loads(response.content)
            except ValueError as exc:  # a truncated body: transient, retry it
                raise _Unparseable(str(exc)) from exc

        payload = await call_with_retry(
            attempt, classify, limiter=self._limiter, clock=self.clock, policy=self._policy
        )
        return parse_response(payload)


class HttpTargetPipeline:
    """The retrieval pipeline for a service under test: one contract call per test and trial.

    The service owns its KB and caching, so `prepare` indexes nothing and nothing is cached here:
    every trial is a fresh call. Only the semantic parts of the response become the retrieval.
    """

    def __init__(
        self,
        model_key: str,
        target: HttpTarget,
        concurrency: int,
        *,
        user_type: str | None = None,
        user_state: Mapping[str, Any] | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.model_key = model_key
        self.target = target
        self._concurrency = concurrency
        self._user_type = user_type
        self._user_state = dict(user_state or {})

    async def prepare(self, kb_entities: Sequence[Entity]) -> PrepareReport:
        del kb_entities  # the service indexes its own KB
        return PrepareReport(entities=0, embedded=0, reused=0)

    async def retrieve(self, test_id: str, query: str, trial: int = 0) -> SemanticRetrieval:
        """One message, as the pipeline's default user."""
        return await self.retrieve_item(
            RetrievalItem(test_id, query, trial, self._user_type, self._user_state)
        )

    async def retrieve_item(self, item: RetrievalItem) -> SemanticRetrieval:
        """One test through the service, as the test's own user type and state (else the
        pipeline's default). Never raises: a failure is an errored retrieval."""
        test_id, query, trial = item.test_id, item.query, item.trial
        user_type = item.user_type or self._user_type
        user_state = {**self._user_state, **item.user_state}
        clock = self.target.clock
        started = clock.now()
        try:
            response = await self.target.call(query, user_type, user_state)
        except Exception as exc:  # any failure is this test's outcome, not the run's
            reason = str(exc) if isinstance(exc, ProviderError) else type(exc).__name__
            return SemanticRetrieval(
                test_id=test_id,
                model=self.model_key,
                trial=trial,
                status="errored",
                latency_ms=(clock.now() - started) * 1000,
                error=f"target: {reason}",
            )
        usage = response.usage or TargetUsage()
        return SemanticRetrieval(
            test_id=test_id,
            model=self.model_key,
            trial=trial,
            status="ok",
            candidates=[Candidate(entity_id=c.entity_id, score=c.score) for c in response.candidates],
            selections=[
                Selection(entity_id=s.entity_id, rank=rank, reason=s.reason)
                for rank, s in enumerate(response.selections, start=1)
            ],
            usage=usage.as_usage(),
            cost_usd=usage.cost_usd,
            latency_ms=(clock.now() - started) * 1000,
            api_calls=1,
        )

    async def retrieve_many(
        self, items: Sequence[RetrievalItem], on_done: OnDone | None = None
    ) -> list[SemanticRetrieval]:
        """All items, at most `concurrency` at a time; results in input order."""
        return await retrieve_all(self.retrieve_item, items, self._concurrency, on_done)

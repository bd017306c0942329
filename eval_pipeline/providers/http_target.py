"""The team's system over HTTP: one POST per test and mechanism (docs/http_target.md).

The request is `SystemRequest` as JSON; the answer must be a 200 with a `SystemAnswer` JSON object.
Failures are retried by the shared policy (429/500/502/503/504/529 honouring `retry-after`,
timeouts, connection errors, unparseable JSON); an answer that parses but breaks the contract is
not retried: it errors the test with the reason.
"""

from __future__ import annotations

import json

import httpx

from eval_pipeline.core.inputs.contract import SystemAnswer, SystemRequest, parse_answer
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

    async def ask(self, request: SystemRequest) -> SystemAnswer:
        """One request; raises ContractViolation for an answer that breaks the contract."""
        body = request.model_dump(mode="json")

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
        return parse_answer(payload, request.mechanism)

"""The team's system over HTTP: one POST per test and mechanism (docs/http_target.md).

The request is `SystemRequest` as JSON; the answer must be a 200 with a `SystemAnswer` JSON object.
Failures are retried by the shared policy (429/500/502/503/504/529 honouring `retry-after`,
timeouts, connection errors, replies cut short or dropped, unparseable JSON); an answer that
parses but breaks the contract is not retried: it errors the test with the reason.
"""

from __future__ import annotations

import json

import httpx

from eval_pipeline.core.inputs.contract import SystemAnswer, SystemRequest, parse_answer
from eval_pipeline.providers.api_base import ApiAccess, ApiProvider
from eval_pipeline.providers.ratelimit import Failure, LoopLocal, broken_off, failure_for_status, unreachable


class _HttpStatus(Exception):
    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


class _Unparseable(Exception):
    pass


def classify(exc: BaseException) -> Failure | None:
    if isinstance(exc, httpx.TimeoutException):
        return unreachable("timeout")
    if isinstance(exc, httpx.ConnectError):
        return unreachable("connection error")
    if isinstance(exc, httpx.TransportError):  # connected, then cut short or dropped: it is up
        return broken_off("connection dropped")
    if isinstance(exc, _HttpStatus):
        response = exc.response
        return failure_for_status(response.status_code, response.headers, response.text[:200])
    if isinstance(exc, _Unparseable):
        return Failure("malformed response", retryable=True)
    return None


class HttpTarget(ApiProvider):
    """A client for one retrieval service implementing the contract, at `access.base_url`
    (never shown: a URL may embed credentials)."""

    def __init__(self, access: ApiAccess) -> None:
        if access.base_url is None:
            raise ValueError("an HTTP target needs its service's URL")
        super().__init__("team system", access, access.base_url, classify)
        self.url = access.base_url
        self._client = LoopLocal(
            lambda: httpx.AsyncClient(timeout=access.timeout_s), close=lambda client: client.aclose()
        )

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

        payload = await self._paced(attempt)
        return parse_answer(payload, request.mechanism)

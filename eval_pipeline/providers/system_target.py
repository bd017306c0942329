"""The team's own system under test, reached over HTTP (`HttpTarget`, below) or as a Python
entry point (`python_target`): the semantic pipeline it stands in for, and its answers for the
state, pattern and always banks (the contract: docs/http_target.md).

Transient failures are retried by the shared policy; an answer that parses but breaks the
contract is not. Every failure is that test's outcome (errored, with the reason), never the run's.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import httpx

from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.contract import ContractViolation, SystemAnswer, SystemRequest, parse_answer
from eval_pipeline.core.inputs.kb import Entity
from eval_pipeline.core.inputs.loading import Banks
from eval_pipeline.core.inputs.stage_depths import CANDIDATE_K
from eval_pipeline.core.mechanisms.retrieval import Candidate, Selection, SemanticRetrieval, Usage
from eval_pipeline.core.scoring.evaluation import MechanismOutput, Scope
from eval_pipeline.core.scoring.implementations import answer_output, system_requests
from eval_pipeline.providers.api_base import ApiAccess, ApiProvider
from eval_pipeline.providers.base import ProviderError
from eval_pipeline.providers.models import ModelConfig
from eval_pipeline.providers.ratelimit import Failure, LoopLocal, broken_off, failure_for_status, unreachable
from eval_pipeline.providers.target import OnDone, PrepareReport, RetrievalItem, retrieve_all

if TYPE_CHECKING:
    from eval_pipeline.providers.ratelimit import Clock

REASON_PREFIX = "target: "


class SystemTarget(Protocol):
    """One way of reaching the team's system."""

    clock: Clock

    async def ask(self, request: SystemRequest) -> SystemAnswer: ...

    async def aclose(self) -> None: ...


class _Unparseable(Exception):
    pass


def classify(exc: BaseException) -> Failure | None:
    if isinstance(exc, httpx.TimeoutException):
        return unreachable("timeout")
    if isinstance(exc, httpx.ConnectError):
        return unreachable("connection error")
    if isinstance(exc, httpx.TransportError):  # connected, then cut short or dropped: it is up
        return broken_off("connection dropped")
    if isinstance(exc, httpx.HTTPStatusError):  # any status but 200
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
                raise httpx.HTTPStatusError(
                    f"HTTP {response.status_code}", request=response.request, response=response
                )
            try:
                return json.loads(response.content)
            except ValueError as exc:  # a truncated body: transient, retry it
                raise _Unparseable(str(exc)) from exc

        payload = await self._paced(attempt)
        return parse_answer(payload, request.mechanism)


def make_target(cfg: ModelConfig) -> SystemTarget:
    """The client for `cfg`'s system. A Python entry point is imported here (EntrypointError)."""
    system = cfg.system
    assert system is not None  # only a model with a system asks for one
    if system.kind == "http":
        access = ApiAccess(
            base_url=system.url, timeout_s=system.timeout_s, policy=cfg.retry_policy, faults=cfg.faults
        )
        return HttpTarget(access)
    from eval_pipeline.providers.python_target import PythonTarget

    assert system.entrypoint is not None  # validated with the kind
    return PythonTarget(system.entrypoint, system.mechanisms, system.timeout_s, breaker=cfg.breaker)


def failure_reason(exc: Exception) -> str:
    """Why a call failed, in one line (an unexpected exception is named by its type only)."""
    known = isinstance(exc, ProviderError | ContractViolation)
    return REASON_PREFIX + (str(exc) if known else type(exc).__name__)


class SystemPipeline:
    """The semantic mechanism answered by the team's system, a fresh call per test and trial: the
    system owns its KB and caching, so `prepare` indexes nothing and nothing is cached here."""

    def __init__(
        self, model_key: str, target: SystemTarget, concurrency: int, candidate_depth: int = CANDIDATE_K
    ) -> None:
        self.model_key = model_key
        self._depth = candidate_depth
        self.target = target
        self._concurrency = concurrency

    async def prepare(self, kb_entities: Sequence[Entity]) -> PrepareReport:
        del kb_entities  # the system indexes its own KB
        return PrepareReport(entities=0, embedded=0, reused=0)

    async def retrieve(self, test_id: str, query: str, trial: int = 0) -> SemanticRetrieval:
        return await self.retrieve_item(RetrievalItem(test_id, query, trial))

    async def retrieve_item(self, item: RetrievalItem) -> SemanticRetrieval:
        """One test through the system, as the test's own user type and state."""
        request = SystemRequest(
            mechanism=Mechanism.SEMANTIC,
            message=item.query,
            user_type=item.user_type,
            user_state=dict(item.user_state),
            top_k_candidates=self._depth,
        )
        clock = self.target.clock
        started = clock.now()
        try:
            answer, error = await self.target.ask(request), None
        except Exception as exc:  # any failure is this test's outcome (no answer), not the run's
            answer, error = SystemAnswer(), failure_reason(exc)
        usage = answer.usage
        return SemanticRetrieval(
            test_id=item.test_id,
            model=self.model_key,
            trial=item.trial,
            status="ok" if error is None else "errored",
            candidates=[Candidate(entity_id=c.entity_id, score=c.score) for c in answer.candidates or []],
            selections=[
                Selection(entity_id=s.entity_id, rank=rank, reason=s.reason)
                for rank, s in enumerate(answer.selections or [], start=1)
            ],
            usage=Usage() if usage is None else Usage.model_validate(usage.model_dump(exclude={"cost_usd"})),
            cost_usd=usage.cost_usd if usage is not None else 0.0,
            latency_ms=(clock.now() - started) * 1000,
            api_calls=int(error is None),
            error=error,
        )

    async def retrieve_many(
        self, items: Sequence[RetrievalItem], on_done: OnDone | None = None
    ) -> list[SemanticRetrieval]:
        """All items, at most `concurrency` at a time; results in input order."""
        return await retrieve_all(self.retrieve_item, items, self._concurrency, on_done)


async def ask_all(
    target: SystemTarget, requests: Sequence[tuple[str, SystemRequest]], concurrency: int
) -> list[MechanismOutput]:
    """Each (test id, request) through the system, at most `concurrency` at a time, in order."""

    async def one(asked: tuple[str, SystemRequest]) -> MechanismOutput:
        test_id, request = asked
        try:
            answer = await target.ask(request)
        except Exception as exc:  # this test's outcome, not the run's
            return MechanismOutput(
                test_id=test_id, mechanism=request.mechanism, entities=[], error=failure_reason(exc)
            )
        return answer_output(test_id, request.mechanism, answer)

    try:
        return await retrieve_all(one, requests, concurrency)
    finally:
        await target.aclose()


def run_system(cfg: ModelConfig, banks: Banks, scope: Scope) -> list[MechanismOutput]:
    """The system's outputs for the scope's tests of the non-semantic banks `cfg` assigns to it
    (none when it assigns none)."""
    requests = system_requests(banks, scope, cfg.system_mechanisms)
    if cfg.system is None or not requests:
        return []
    target = make_target(cfg)
    return asyncio.run(ask_all(target, requests, cfg.concurrency))

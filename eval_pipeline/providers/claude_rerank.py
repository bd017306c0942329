"""Claude as the reranker, through `anthropic.AsyncAnthropic` and forced tool use.

The static instructions sit in a system block marked `cache_control`, so the tools + system prefix
is one cacheable prefix shared by every call. The API silently skips caching below a per-model
minimum prefix (1024-4096 tokens); this one is ~300 tokens today, so the real API reports no
cache tokens until it grows (`usage.cache_read_input_tokens` says whether caching happened; the
emulator's `cache_min_tokens` models the minimum). The candidates (id, title, summary) and the
user's message go in the user turn.

The answer must be a subset of the candidates, without duplicates, 1..top_k long. An invalid
answer gets ONE repair call that shows the model its validation error; a second invalid answer
errors the test (`InvalidSelectionError`). SDK retries are off (`max_retries=0`): the shared
policy in `ratelimit` retries, paced by the model's limiter. `base_url` comes from the argument,
else the SDK reads `ANTHROPIC_BASE_URL` itself (no `/v1` suffix).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anthropic
from anthropic.types import Message, MessageParam, ToolParam, ToolUseBlock
from pydantic import BaseModel, ConfigDict, ValidationError

from eval_pipeline.core.mechanisms.retrieval import Selection, Usage
from eval_pipeline.providers.api_base import ApiProvider
from eval_pipeline.providers.base import ProviderError, RerankCandidate, RerankResult
from eval_pipeline.providers.cache import ResponseCache
from eval_pipeline.providers.pricing import Price
from eval_pipeline.providers.ratelimit import (
    Clock,
    Failure,
    LoopLocal,
    RateLimiter,
    RetryPolicy,
    call_with_retry,
    failure_for_status,
)

PROVIDER = "anthropic"
TOOL_NAME = "select_entities"
MAX_OUTPUT_TOKENS = 1024

SYSTEM_PROMPT = """\
You are the reranking stage of a knowledge-base retrieval system behind a conversational \
assistant. Each request gives you a user's message and candidate knowledge-base entities that an \
embedding search found for it, listed as `[entity_id] title: summary`, most similar first.

Choose the entities the assistant should load to answer that message well.
- Choose only listed candidates, copying each entity_id exactly as written between the brackets.
- Order your choices from most to least useful.
- Choose at least one entity and no more than the request allows; fewer beats padding with weak \
matches.
- Choose each entity at most once.
- Give a short reason for each choice.
- Answer only by calling the select_entities tool; do not reply to the user's message itself.
"""

SELECT_TOOL: ToolParam = {
    "name": TOOL_NAME,
    "description": "Record the chosen knowledge-base entities, most useful first.",
    "strict": True,
    "input_schema": {
        "type": "object",
        "properties": {
            "selections": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "entity_id": {"type": "string"},
                        "reason": {"type": "string"},
                    },
                    "required": ["entity_id", "reason"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["selections"],
        "additionalProperties": False,
    },
}


class InvalidSelectionError(ProviderError):
    """The model's answer stayed invalid after the repair call; carries what the calls cost."""

    def __init__(self, reason: str, usage: Usage, api_calls: int) -> None:
        super().__init__(reason, usage, api_calls)


class _Pick(BaseModel):
    model_config = ConfigDict(extra="ignore")

    entity_id: str
    reason: str | None = None


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    selections: list[_Pick]


class _Invalid(Exception):
    pass


def validate_answer(tool_input: object, candidate_ids: Sequence[str], top_k: int) -> list[_Pick]:
    """The picks, or `_Invalid` with a message the model can act on."""
    try:
        picks = _Answer.model_validate(tool_input).selections
    except ValidationError:
        raise _Invalid(
            "the input must be {selections: [{entity_id, reason}, ...]} with string values"
        ) from None
    ids = [p.entity_id for p in picks]
    problems = []
    unknown = [i for i in ids if i not in set(candidate_ids)]
    if unknown:
        problems.append(f"not among the candidates: {', '.join(unknown)}")
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        problems.append(f"chosen more than once: {', '.join(duplicates)}")
    if not 1 <= len(ids) <= top_k:
        problems.append(f"{len(ids)} entities chosen, allowed 1 to {top_k}")
    if problems:
        raise _Invalid("; ".join(problems)[:400])
    return picks


def render_candidates(query: str, candidates: Sequence[RerankCandidate], top_k: int) -> str:
    lines = [f"[{c.entity_id}] {_one_line(c.title)}: {_one_line(c.summary)}" for c in candidates]
    return (
        "Candidates:\n"
        + "\n".join(lines)
        + f"\n\nSelect at most {top_k} entities for this user message:\n"
        + f"<message>\n{query}\n</message>"
    )


def _one_line(text: str) -> str:
    return " ".join(text.split())


def classify(exc: BaseException) -> Failure | None:
    """The retry policy's view of an anthropic exception (None: not an API failure)."""
    if isinstance(exc, anthropic.APITimeoutError):
        return Failure("timeout", retryable=True)
    if isinstance(exc, anthropic.APIConnectionError):
        return Failure("connection error", retryable=True)
    if isinstance(exc, anthropic.APIStatusError):
        return failure_for_status(exc.status_code, exc.response.headers, exc.api_message)
    return None


def usage_of(message: Message) -> Usage:
    u = message.usage
    return Usage(
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        cache_creation_input_tokens=u.cache_creation_input_tokens or 0,
        cache_creation_1h_input_tokens=u.cache_creation.ephemeral_1h_input_tokens if u.cache_creation else 0,
        cache_read_input_tokens=u.cache_read_input_tokens or 0,
    )


def _tool_use(message: Message) -> ToolUseBlock | None:
    return next((b for b in message.content if isinstance(b, ToolUseBlock) and b.name == TOOL_NAME), None)


def _repair_turns(message: Message, error: str, top_k: int) -> list[MessageParam]:
    """The model's invalid answer, then the validation error it must fix."""
    instruction = (
        f"That selection is invalid: {error}. Call {TOOL_NAME} again with 1 to {top_k} "
        "distinct entity ids copied from the candidate list."
    )
    tool_use = _tool_use(message)
    if tool_use is None:
        return [
            {"role": "assistant", "content": "(no selection)"},
            {"role": "user", "content": instruction},
        ]
    return [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": tool_use.id, "name": TOOL_NAME, "input": tool_use.input}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": tool_use.id,
                    "content": instruction,
                    "is_error": True,
                }
            ],
        },
    ]


class ClaudeReranker(ApiProvider):
    """Reranks candidates with Claude; final valid selections are cached per trial."""

    def __init__(
        self,
        model_id: str,
        api_key: str,
        base_url: str | None,
        cache: ResponseCache,
        limiter: RateLimiter | None,
        price: Price,
        prompt_version: str,
        *,
        clock: Clock | None = None,
        policy: RetryPolicy | None = None,
        timeout_s: float = 60.0,
    ) -> None:
        super().__init__(model_id, api_key, cache, limiter, clock, policy)
        self.price = price
        self.prompt_version = prompt_version
        self._client = LoopLocal(
            lambda: anthropic.AsyncAnthropic(
                api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout_s
            ),
            close=lambda client: client.close(),
        )

    async def aclose(self) -> None:
        """Close this loop's connections now (they are closed when the loop ends anyway)."""
        await self._client.aclose()

    def _cache_key(self, query: str, candidates: Sequence[RerankCandidate], top_k: int, trial: int) -> str:
        request = {
            "query": query,
            "candidates": [[c.entity_id, c.title, c.summary] for c in candidates],
            "top_k": top_k,
        }
        return self._cache.key(PROVIDER, self.model_id, request, self.prompt_version, trial)

    async def rerank(
        self, query: str, candidates: Sequence[RerankCandidate], top_k: int, trial: int = 0
    ) -> RerankResult:
        if not candidates:
            return RerankResult([])
        top_k = min(top_k, len(candidates))
        key = self._cache_key(query, candidates, top_k, trial)
        cached = self._cache.get(key)
        if cached is not None:
            return RerankResult(_selections(_Answer.model_validate(cached).selections), cache_hits=1)
        picks, usage, calls = await self._select(query, candidates, top_k)
        self._cache.put(key, {"selections": [p.model_dump() for p in picks]})
        return RerankResult(_selections(picks), usage=usage, api_calls=calls)

    async def _select(
        self, query: str, candidates: Sequence[RerankCandidate], top_k: int
    ) -> tuple[list[_Pick], Usage, int]:
        ids = [c.entity_id for c in candidates]
        messages: list[MessageParam] = [
            {"role": "user", "content": render_candidates(query, candidates, top_k)}
        ]
        first = await self._create(messages)
        try:
            return validate_answer(_input_of(first), ids, top_k), usage_of(first), 1
        except _Invalid as invalid:
            messages += _repair_turns(first, str(invalid), top_k)
        try:
            second = await self._create(messages)
        except ProviderError as exc:
            # The first call was billed even though the repair never answered.
            raise ProviderError(f"repair call failed: {exc}", usage_of(first), api_calls=1) from None
        usage = usage_of(first) + usage_of(second)
        try:
            return validate_answer(_input_of(second), ids, top_k), usage, 2
        except _Invalid as invalid:
            raise InvalidSelectionError(
                f"invalid selection after repair: {invalid}", usage, api_calls=2
            ) from None

    async def _create(self, messages: list[MessageParam]) -> Message:
        async def attempt() -> Message:
            return await self._client.get().messages.create(
                model=self.model_id,
                max_tokens=MAX_OUTPUT_TOKENS,
                system=[{"type": "text", "text": SYSTEM_PROMPT, "cache_control": {"type": "ephemeral"}}],
                tools=[SELECT_TOOL],
                tool_choice={"type": "tool", "name": TOOL_NAME},
                messages=messages,
            )

        return await call_with_retry(
            attempt,
            classify,
            limiter=self._limiter,
            clock=self._clock,
            policy=self._policy,
            secret=self._api_key,
        )


def _input_of(message: Message) -> Any:
    tool_use = _tool_use(message)
    if tool_use is None:
        raise _Invalid(f"no {TOOL_NAME} call in the reply")
    return tool_use.input


def _selections(picks: Sequence[_Pick]) -> list[Selection]:
    return [
        Selection(entity_id=p.entity_id, rank=rank, reason=p.reason) for rank, p in enumerate(picks, start=1)
    ]

"""Claude as the reranker, through `anthropic.AsyncAnthropic` and forced tool use.

The tool, the instructions and (rerank-v2 and later) a catalogue of the KB's rerankable entities
form one stable prefix marked `cache_control`; the candidates and the user's message go in the
user turn. The API caches a prefix only from a per-model minimum length (`prompt_cache`): the
catalogue is what can make caching pay (rerank-v1, below every minimum, reproduces older runs).
An invalid answer gets ONE repair call that shows the model its validation error; a second
invalid answer errors the test. A request a message batch did not answer is retried online: a
flaky batch costs money, never a test.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from anthropic.types import (
    Message,
    MessageParam,
    TextBlockParam,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlock,
    ToolUseBlockParam,
)
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from pydantic import BaseModel, ConfigDict, ValidationError

from eval_pipeline.core.mechanisms.retrieval import Selection, Usage
from eval_pipeline.providers.anthropic_client import AnthropicProvider, cached_system, usage_of
from eval_pipeline.providers.api_base import ApiAccess
from eval_pipeline.providers.base import ProviderError, RerankCandidate, RerankRequest, RerankResult
from eval_pipeline.providers.cache import ResponseCache
from eval_pipeline.providers.prompt_cache import PromptCacheStatus, minimum_cacheable_tokens

PROVIDER = "anthropic"
TOOL_NAME = "select_entities"
MAX_OUTPUT_TOKENS = 1024
LEGACY_PROMPT_VERSION = "rerank-v1"  # no catalogue in the prefix
DEFAULT_POLL_S = 30.0
COUNT_PROBE = "Select entities for this message."

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
                    "properties": {"entity_id": {"type": "string"}, "reason": {"type": "string"}},
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


class _Pick(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="ignore")

    entity_id: str
    reason: str | None = None


class _Answer(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="ignore")

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
    unknown = [i for i in ids if i not in set(candidate_ids)]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    problems = [f"not among the candidates: {', '.join(unknown)}"] if unknown else []
    problems += [f"chosen more than once: {', '.join(duplicates)}"] if duplicates else []
    problems += [] if 1 <= len(ids) <= top_k else [f"{len(ids)} entities chosen, allowed 1 to {top_k}"]
    if problems:
        raise _Invalid("; ".join(problems)[:400])
    return picks


def render_candidates(query: str, candidates: Sequence[RerankCandidate], top_k: int) -> str:
    return (
        f"Candidates:\n{_lines(candidates)}\n\nSelect at most {top_k} entities for this user message:\n"
        f"<message>\n{query}\n</message>"
    )


def render_catalogue(entities: Sequence[RerankCandidate]) -> str:
    """Every rerankable entity, one line each, sorted by id: the same text for every request."""
    lines = _lines(sorted(entities, key=lambda e: e.entity_id))
    return f"Knowledge-base catalogue: every entity a request may offer as a candidate, by id.\n{lines}"


def _lines(candidates: Sequence[RerankCandidate]) -> str:
    """`[entity_id] title: summary`, one line each, whitespace runs collapsed."""
    return "\n".join(
        f"[{c.entity_id}] {' '.join(c.title.split())}: {' '.join(c.summary.split())}" for c in candidates
    )


def _tool_use(message: Message) -> ToolUseBlock | None:
    return next((b for b in message.content if isinstance(b, ToolUseBlock) and b.name == TOOL_NAME), None)


def _repair_turns(message: Message, error: str, top_k: int) -> list[MessageParam]:
    """The model's invalid answer, then the validation error it must fix."""
    instruction = (
        f"That selection is invalid: {error}. Call {TOOL_NAME} again with 1 to {top_k} "
        "distinct entity ids copied from the candidate list."
    )
    block = _tool_use(message)
    if block is None:
        return [{"role": "assistant", "content": "(no selection)"}, {"role": "user", "content": instruction}]
    call: ToolUseBlockParam = {"type": "tool_use", "id": block.id, "name": TOOL_NAME, "input": block.input}
    result: ToolResultBlockParam = {
        "type": "tool_result",
        "tool_use_id": block.id,
        "content": instruction,
        "is_error": True,
    }
    return [{"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]


class ClaudeReranker(AnthropicProvider):
    """Reranks candidates with Claude; final valid selections are cached per trial."""

    def __init__(
        self,
        model_id: str,
        access: ApiAccess,
        cache: ResponseCache,
        prompt_version: str,
        poll_interval_s: float = DEFAULT_POLL_S,
    ) -> None:
        super().__init__(model_id, access, poll_interval_s)
        self._cache = cache
        self.prompt_version = prompt_version
        self._catalogue: str | None = None

    async def prepare(self, catalogue: Sequence[RerankCandidate]) -> PromptCacheStatus:
        """Put the KB's catalogue in the prefix (not for rerank-v1) and count the prefix: two
        free count_tokens calls, (tools + system + probe) minus (probe alone). The count only
        informs: when it fails (an outage of that endpoint, a gateway without it) the run goes on
        and says the cache status is unknown, rather than error every test."""
        self.use_catalogue(catalogue)
        minimum = minimum_cacheable_tokens(self.model_id)
        probe: list[MessageParam] = [{"role": "user", "content": COUNT_PROBE}]
        try:
            with_prefix = await self._count_tokens(
                system=self._system(),
                tools=[SELECT_TOOL],
                tool_choice={"type": "tool", "name": TOOL_NAME},
                messages=probe,
            )
            prefix = with_prefix - await self._count_tokens(messages=probe)
            status = PromptCacheStatus(model_id=self.model_id, prefix_tokens=prefix, minimum=minimum)
        except ProviderError as exc:
            status = PromptCacheStatus(
                model_id=self.model_id, prefix_tokens=None, minimum=minimum, count_error=str(exc)
            )
        # A prefix the API will not cache has nothing for a first call to write.
        self._warmed = status.below_minimum
        return status

    def use_catalogue(self, catalogue: Sequence[RerankCandidate]) -> None:
        """The KB's catalogue in the prefix (not for rerank-v1); no call."""
        if self.prompt_version != LEGACY_PROMPT_VERSION:
            self._catalogue = render_catalogue(catalogue)

    def prefix_text(self) -> str:
        """The cacheable prefix (tool, instructions, catalogue) as text, for estimates that call nothing."""
        return json.dumps(SELECT_TOOL) + "".join(block["text"] for block in self._system())

    def cached(self, query: str, candidates: Sequence[RerankCandidate], top_k: int, trial: int = 0) -> bool:
        """Whether a rerank of this request would call nothing (its answer is in the response cache)."""
        return self._lookup(RerankRequest(query, candidates, top_k, trial))[2] is not None

    def _system(self, long_ttl: bool = False) -> list[TextBlockParam]:
        return cached_system(SYSTEM_PROMPT, self._catalogue, long_ttl)

    def _params(
        self, messages: list[MessageParam], long_ttl: bool = False
    ) -> MessageCreateParamsNonStreaming:
        return {
            "model": self.model_id,
            "max_tokens": MAX_OUTPUT_TOKENS,
            "system": self._system(long_ttl),
            "tools": [SELECT_TOOL],
            "tool_choice": {"type": "tool", "name": TOOL_NAME},
            "messages": messages,
        }

    def _lookup(self, request: RerankRequest) -> tuple[RerankRequest, str, RerankResult | None]:
        """The request with top_k capped at its candidates, its response-cache key, and its answer
        when it needs no call (no candidates, or cached)."""
        r = replace(request, top_k=min(request.top_k, len(request.candidates)))
        payload: dict[str, Any] = {
            "query": r.query,
            "candidates": [[c.entity_id, c.title, c.summary] for c in r.candidates],
            "top_k": r.top_k,
        }
        if self._catalogue is not None:  # the model sees the whole catalogue: part of the input
            payload["catalogue"] = hashlib.sha256(self._catalogue.encode()).hexdigest()
        key = self._cache.key(PROVIDER, self.model_id, payload, self.prompt_version, r.trial)
        if not r.candidates:
            return r, key, RerankResult([])
        cached = self._cache.get(key)
        if cached is None:
            return r, key, None
        return r, key, RerankResult(_selections(_Answer.model_validate(cached).selections), cache_hits=1)

    async def rerank(
        self, query: str, candidates: Sequence[RerankCandidate], top_k: int, trial: int = 0
    ) -> RerankResult:
        request, key, known = self._lookup(RerankRequest(query, candidates, top_k, trial))
        return known if known is not None else await self._answer(request, key)

    async def rerank_batch(self, requests: Sequence[RerankRequest]) -> list[RerankResult | ProviderError]:
        """The requests the response cache cannot answer go out as one message batch (split
        above 10,000); custom ids are positions, so answers map back whatever their order."""
        looked = [self._lookup(request) for request in requests]
        todo = {f"rerank-{i:06d}": r for i, (r, _, known) in enumerate(looked) if known is None}
        batch = {cid: self._params(_first_turn(r), long_ttl=True) for cid, r in todo.items()}
        answers = await self._run_batch(batch) if batch else {}

        async def finish(
            i: int, r: RerankRequest, key: str, known: RerankResult | None
        ) -> RerankResult | ProviderError:
            if known is not None:
                return known
            answer = answers.get(f"rerank-{i:06d}")
            try:  # a request the batch did not answer takes the online path instead
                return await self._answer(r, key, answer if isinstance(answer, Message) else None)
            except ProviderError as exc:
                return exc

        return list(await asyncio.gather(*(finish(i, *x) for i, x in enumerate(looked))))

    async def _answer(self, r: RerankRequest, key: str, batched: Message | None = None) -> RerankResult:
        """The valid selection, cached; `batched` is a first answer from a batch (else called)."""
        ids = [c.entity_id for c in r.candidates]
        messages = _first_turn(r)
        if batched is None:
            first = await self._messages_create(self._params(messages))
            online, batch = usage_of(first), Usage()
        else:
            first, online, batch = batched, Usage(), usage_of(batched)
        calls = 1
        try:
            picks = validate_answer(_input_of(first), ids, r.top_k)
        except _Invalid as invalid:
            messages += _repair_turns(first, str(invalid), r.top_k)
            try:
                second = await self._messages_create(self._params(messages))
            except ProviderError as exc:
                # The first call was billed even though the repair never answered.
                raise ProviderError(f"repair call failed: {exc}", online, 1, batch) from None
            online, calls = online + usage_of(second), 2
            try:
                picks = validate_answer(_input_of(second), ids, r.top_k)
            except _Invalid as invalid_again:
                raise InvalidSelectionError(
                    f"invalid selection after repair: {invalid_again}", online, 2, batch
                ) from None
        self._cache.put(key, {"selections": [p.model_dump() for p in picks]})
        return RerankResult(_selections(picks), usage=online, api_calls=calls, batch_usage=batch)


def _first_turn(r: RerankRequest) -> list[MessageParam]:
    return [{"role": "user", "content": render_candidates(r.query, r.candidates, r.top_k)}]


def _input_of(message: Message) -> Any:
    tool_use = _tool_use(message)
    if tool_use is None:
        raise _Invalid(f"no {TOOL_NAME} call in the reply")
    return tool_use.input


def _selections(picks: Sequence[_Pick]) -> list[Selection]:
    return [
        Selection(entity_id=p.entity_id, rank=rank, reason=p.reason) for rank, p in enumerate(picks, start=1)
    ]

"""What the Claude reranker and the calibrator share about the Anthropic API: how a failure
looks to the retry policy, a message's usage, the cached prefix and the first call that writes
it, token counting and Message Batches (half price, ended within 24 hours).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import anthropic
import httpx2  # the SDK's HTTP client: what its connection errors wrap
from anthropic.types import CacheControlEphemeralParam, Message, TextBlockParam
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from anthropic.types.messages import MessageBatch, MessageBatchIndividualResponse
from anthropic.types.messages.batch_create_params import Request

from eval_pipeline.core.mechanisms.retrieval import Usage
from eval_pipeline.providers.api_base import ApiAccess, ApiProvider
from eval_pipeline.providers.ratelimit import Failure, LoopLocal, broken_off, failure_for_status, unreachable

MAX_BATCH_REQUESTS = 10_000  # the API's cap on requests per batch
DEFAULT_BASE_URL = "https://api.anthropic.com"

BatchProgress = Callable[[str, int, int], None]  # (batch id, ended requests, total)


def classify(exc: BaseException) -> Failure | None:
    """The retry policy's view of an anthropic exception (None: not an API failure)."""
    if isinstance(exc, anthropic.APITimeoutError):
        return unreachable("timeout")
    if isinstance(exc, anthropic.APIConnectionError):
        if exc.__cause__ is None or isinstance(exc.__cause__, httpx2.ConnectError):
            return unreachable("connection error")
        return broken_off("connection dropped")  # connected, then cut short: the service is up
    if isinstance(exc, anthropic.APIStatusError):
        return failure_for_status(exc.status_code, exc.response.headers, exc.api_message)
    return None


class AnthropicProvider(ApiProvider):
    """An API provider calling Claude through one `AsyncAnthropic` per event loop, whose own
    retries are off: the shared policy retries, paced by the model's limiter."""

    def __init__(self, model_id: str, access: ApiAccess, poll_interval_s: float) -> None:
        # Where the SDK sends requests: the argument, else `ANTHROPIC_BASE_URL`, else the API.
        url = access.base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        super().__init__(model_id, access, url, classify)
        self.poll_interval_s = poll_interval_s  # between looks at a message batch
        self._client: LoopLocal[anthropic.AsyncAnthropic] = LoopLocal(
            lambda: anthropic.AsyncAnthropic(
                api_key=access.api_key, base_url=access.base_url, max_retries=0, timeout=access.timeout_s
            ),
            close=lambda client: client.close(),
        )
        # Until a call has succeeded, calls run one at a time: the first writes the cached prompt
        # prefix and the others read it instead of each writing it again. A subclass that knows
        # nothing will be written sets `_warmed`.
        self._warmed = False
        self._warm_lock = LoopLocal(asyncio.Lock)

    async def _messages_create(self, params: MessageCreateParamsNonStreaming) -> Message:
        if not self._warmed:
            async with self._warm_lock.get():
                if not self._warmed:
                    message = await self._paced(lambda: self._client.get().messages.create(**params))
                    self._warmed = True
                    return message
        return await self._paced(lambda: self._client.get().messages.create(**params))

    async def _count_tokens(self, **params: Any) -> int:
        """A free `messages.count_tokens` call: retried, not paced as a model call."""
        client = self._client.get()
        counted = await self._unpaced(lambda: client.messages.count_tokens(model=self.model_id, **params))
        return counted.input_tokens

    async def _run_batch(
        self,
        requests: Mapping[str, MessageCreateParamsNonStreaming],
        on_progress: BatchProgress | None = None,
    ) -> dict[str, Message | str]:
        """Every request's message, or why it has none, by custom id (a request the API returned
        nothing for is absent). Batch calls are retried, never paced: the batch endpoints do not
        count against the model's request pace. Polling stops, and the batch fails, when the next
        poll would pass the run deadline of the guard's wait caps."""
        client = self._client.get()
        ids = list(requests)
        results: dict[str, Message | str] = {}
        for start in range(0, len(ids), MAX_BATCH_REQUESTS):
            chunk = ids[start : start + MAX_BATCH_REQUESTS]
            items: list[Request] = [{"custom_id": cid, "params": requests[cid]} for cid in chunk]
            batch = await self._unpaced(partial(client.messages.batches.create, requests=items))
            while not _ended(batch, on_progress):
                demand = f"message batch {batch.id} in progress: next poll in {self.poll_interval_s:g} s"
                await self._guard.waits.sleep(self.poll_interval_s, demand)
                batch = await self._unpaced(partial(client.messages.batches.retrieve, batch.id))
            async for item in await self._unpaced(partial(client.messages.batches.results, batch.id)):
                if item.custom_id in requests:
                    results[item.custom_id] = _message_or_reason(item)
        return results


def _ended(batch: MessageBatch, on_progress: BatchProgress | None) -> bool:
    """Report the batch's progress; whether it has ended."""
    counts = batch.request_counts
    total = counts.processing + counts.succeeded + counts.errored + counts.canceled + counts.expired
    if on_progress is not None:
        on_progress(batch.id, total - counts.processing, total)
    return batch.processing_status == "ended"


def _message_or_reason(item: MessageBatchIndividualResponse) -> Message | str:
    """A batch request's message, or why it has none."""
    outcome = item.result
    if outcome.type == "succeeded":
        return outcome.message
    if outcome.type == "errored":
        error = outcome.error.error
        return f"batch request errored: {error.type}: {error.message}"[:300]
    return f"batch request {outcome.type}"


def cached_system(instructions: str, prefix: str | None, long_ttl: bool) -> list[TextBlockParam]:
    """`instructions`, then `prefix` when there is one; the last block ends the cached prefix.

    A batch's requests run over minutes to hours in no set order, so a 5-minute entry would
    expire and be written again (at the write rate) many times; batches take the 1-hour TTL
    (2x input to write instead of 1.25x, written about once).
    """
    marker: CacheControlEphemeralParam = (
        {"type": "ephemeral", "ttl": "1h"} if long_ttl else {"type": "ephemeral"}
    )
    *plain, last = [instructions] if prefix is None else [instructions, prefix]
    blocks: list[TextBlockParam] = [{"type": "text", "text": text} for text in plain]
    return [*blocks, {"type": "text", "text": last, "cache_control": marker}]


def usage_of(message: Message) -> Usage:
    u = message.usage
    return Usage(
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        cache_creation_input_tokens=u.cache_creation_input_tokens or 0,
        cache_creation_1h_input_tokens=u.cache_creation.ephemeral_1h_input_tokens if u.cache_creation else 0,
        cache_read_input_tokens=u.cache_read_input_tokens or 0,
    )

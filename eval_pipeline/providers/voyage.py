"""Voyage AI embeddings and rerank, through the `voyageai` SDK's AsyncClient.

The SDK's own retries are off (`max_retries=1` is one attempt in voyageai 0.5.0): it ignores
`retry-after` and does not retry 500, so the shared policy retries. The base URL includes `/v1`.
Embedding requests respect the API's per-request caps (1000 texts, a per-model total of tokens);
Voyage's tokenizer downloads from the Hugging Face hub, so tokens are estimated offline,
conservatively, as characters / 3 (English runs about 4 characters a token).
"""

from __future__ import annotations

import asyncio
import base64
import math
import os
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

import aiohttp
import numpy as np
import voyageai
import voyageai.error
from voyageai.client_async import AsyncClient

from eval_pipeline.core.mechanisms.retrieval import Selection, Usage
from eval_pipeline.providers.api_base import ApiAccess, ApiProvider
from eval_pipeline.providers.base import (
    EmbedResult,
    InputType,
    ProviderError,
    RerankCandidate,
    RerankResult,
    Vectors,
)
from eval_pipeline.providers.cache import ResponseCache, Vector
from eval_pipeline.providers.ratelimit import Failure, LoopLocal, broken_off, failure_for_status, unreachable

BASE_URL_ENV = "VOYAGE_BASE_URL"
DEFAULT_BASE_URL = "https://api.voyageai.com/v1"
PROVIDER = "voyage"
# Bump when the request sent or the shape stored in the response cache changes.
_WIRE_VERSION = "voyage-1"
MAX_TEXTS_PER_REQUEST = 1000
# Total tokens per embeddings request (Voyage API reference); unknown models get the smallest.
_TOKEN_CAPS = {
    **dict.fromkeys(("voyage-4-lite", "voyage-3.5-lite"), 1_000_000),
    **dict.fromkeys(("voyage-4", "voyage-3.5", "voyage-2"), 320_000),
}
_DEFAULT_TOKEN_CAP = 120_000
_CHARS_PER_TOKEN = 3

T = TypeVar("T")


def estimate_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / _CHARS_PER_TOKEN))


def plan_batches(
    texts: Sequence[str], max_texts: int = MAX_TEXTS_PER_REQUEST, max_tokens: int = 120_000
) -> list[list[int]]:
    """Indices of `texts` grouped in order into requests within both caps.

    A text estimated above `max_tokens` on its own still goes alone: the API truncates each text
    to the model's context length (`truncation=True`), far below any batch cap.
    """
    batches: list[list[int]] = []
    current: list[int] = []
    tokens = 0
    for i, text in enumerate(texts):
        cost = estimate_tokens(text)
        if current and (len(current) >= max_texts or tokens + cost > max_tokens):
            batches.append(current)
            current, tokens = [], 0
        current.append(i)
        tokens += cost
    if current:
        batches.append(current)
    return batches


def classify(exc: BaseException) -> Failure | None:
    """The retry policy's view of a voyageai exception (None: not an API failure)."""
    if isinstance(exc, voyageai.error.Timeout):
        return unreachable("timeout")
    if isinstance(exc, voyageai.error.APIConnectionError):
        return _transport_failure(exc.__cause__)
    if isinstance(exc, aiohttp.ClientError):
        return _transport_failure(exc)
    if isinstance(exc, voyageai.error.VoyageError):
        status = exc.http_status
        if status is None:
            return Failure(f"voyage error: {exc.user_message}", retryable=False)
        if status < 300:  # a 2xx body that is not JSON: a truncated response
            return Failure("malformed response", retryable=True)
        return failure_for_status(status, exc.headers, exc.user_message)
    if isinstance(exc, _UnreadableResponse):
        return Failure("malformed response", retryable=True)
    return None


def _transport_failure(cause: BaseException | None) -> Failure:
    """Only a connection that could not be made counts against the service's breaker."""
    if cause is None or isinstance(cause, aiohttp.ClientConnectorError):
        return unreachable("connection error")
    if isinstance(cause, aiohttp.ClientPayloadError):
        return broken_off("reply cut short")
    return broken_off("connection dropped")


class _WholeReply(aiohttp.ClientResponse):
    """A response whose body is read before the session hands it over.

    voyageai 0.5.0 reads the body outside its own error handling: a body cut short on the wire
    escapes as aiohttp's `ClientPayloadError` after the SDK has printed it to stderr. Read here,
    inside `session.request`, the same fault reaches the SDK as a connection error (retried by
    the policy) and nothing is printed.
    """

    async def start(self, connection: aiohttp.connector.Connection) -> aiohttp.ClientResponse:
        await super().start(connection)
        await self.read()
        return self


class _UnreadableResponse(Exception):
    """voyageai 0.5.0 returns 5xx other than 500/502/503/504 (e.g. 529) as if successful and then
    fails reading fields that are not there (or, for rerank, indexes a document that is not
    there); such a reply is retried like a malformed one."""


class _VoyageBase(ApiProvider):
    def __init__(self, model_id: str, access: ApiAccess, cache: ResponseCache) -> None:
        url = access.base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL
        super().__init__(model_id, access, url, classify)
        self._cache = cache
        self._sdk = AsyncClient(api_key=access.api_key, max_retries=1, timeout=access.timeout_s, base_url=url)
        # The SDK opens a new aiohttp session (and connection) per request unless one is lent to
        # it through `voyageai.aiosession`: one per loop, reused.
        self._client = LoopLocal(
            lambda: aiohttp.ClientSession(response_class=_WholeReply), close=lambda session: session.close()
        )

    async def _call(self, method: str, **kwargs: Any) -> Any:
        async def attempt() -> Any:
            lent = voyageai.aiosession.set(self._client.get())
            try:
                return await getattr(self._sdk, method)(model=self.model_id, **kwargs)
            except (AttributeError, KeyError, IndexError, TypeError) as exc:
                raise _UnreadableResponse(type(exc).__name__) from exc
            finally:
                voyageai.aiosession.reset(lent)

        return await self._paced(attempt)


class VoyageEmbedder(_VoyageBase):
    """Embeds through Voyage, one cache entry per (model, input type, text)."""

    def __init__(
        self, model_id: str, access: ApiAccess, cache: ResponseCache, max_batch_tokens: int | None = None
    ) -> None:
        super().__init__(model_id, access, cache)
        self.max_batch_tokens = max_batch_tokens or _TOKEN_CAPS.get(model_id, _DEFAULT_TOKEN_CAP)

    def _key(self, text: str, input_type: InputType) -> str:
        request = {"endpoint": "embeddings", "input_type": input_type, "text": text}
        return self._cache.key(PROVIDER, self.model_id, request, _WIRE_VERSION)

    def cached(self, text: str, input_type: InputType) -> bool:
        """Whether the response cache holds this text's vector (embedding it would call nothing)."""
        return self._cache.get(self._key(text, input_type)) is not None

    async def embed(self, texts: Sequence[str], input_type: InputType) -> EmbedResult:
        hits = {text: self._cache.get(self._key(text, input_type)) for text in dict.fromkeys(texts)}
        vectors = {text: _decode(hit["vector"]) for text, hit in hits.items() if hit is not None}
        cache_hits = len(vectors)
        missing = [text for text, hit in hits.items() if hit is None]
        batches = plan_batches(missing, MAX_TEXTS_PER_REQUEST, self.max_batch_tokens)
        jobs = [self._embed_batch([missing[i] for i in b], input_type) for b in batches]
        usage = Usage()
        for fresh, tokens in await _gather_or_cancel(jobs):
            vectors.update(fresh)
            usage = usage + Usage(input_tokens=tokens)
        return EmbedResult(
            vectors=_stack([vectors[t] for t in texts]),
            usage=usage,
            api_calls=len(batches),
            cache_hits=cache_hits,
        )

    async def _embed_batch(self, texts: list[str], input_type: InputType) -> tuple[dict[str, Vector], int]:
        response = await self._call("embed", texts=texts, input_type=input_type)
        fresh = {t: np.asarray(e, dtype=np.float32) for t, e in zip(texts, response.embeddings, strict=True)}
        for text, vector in fresh.items():
            self._cache.put(self._key(text, input_type), {"vector": _encode(vector)})
        return fresh, int(response.total_tokens)


def rerank_documents(candidates: Sequence[RerankCandidate]) -> list[str]:
    """What Voyage rerank reads of each candidate."""
    return [f"{c.title}: {c.summary}" for c in candidates]


class VoyageReranker(_VoyageBase):
    """Voyage rerank over "title: summary" documents; relevance order, score in the reason."""

    def _key(self, query: str, documents: list[str], top_k: int, trial: int) -> str:
        request = {"endpoint": "rerank", "query": query, "documents": documents, "top_k": top_k}
        return self._cache.key(PROVIDER, self.model_id, request, _WIRE_VERSION, trial)

    def cached(self, query: str, candidates: Sequence[RerankCandidate], top_k: int, trial: int = 0) -> bool:
        """Whether the response cache holds this request's answer (a rerank would call nothing)."""
        documents = rerank_documents(candidates)
        return self._cache.get(self._key(query, documents, min(top_k, len(documents)), trial)) is not None

    async def rerank(
        self, query: str, candidates: Sequence[RerankCandidate], top_k: int, trial: int = 0
    ) -> RerankResult:
        if not candidates:
            return RerankResult([])
        documents = rerank_documents(candidates)
        top_k = min(top_k, len(documents))
        key = self._key(query, documents, top_k, trial)
        cached = self._cache.get(key)
        if cached is not None and _malformed(cached.get("results"), len(documents), top_k) is None:
            return RerankResult(_selections(cached["results"], candidates), cache_hits=1)
        response = await self._call("rerank", query=query, documents=documents, top_k=top_k)
        results = [[r.index, float(r.relevance_score)] for r in response.results]
        usage = Usage(input_tokens=int(response.total_tokens))
        problem = _malformed(results, len(documents), top_k)
        if problem is not None:  # never cached: a bad answer must not be replayed as a good one
            raise ProviderError(f"voyage rerank answer is malformed: {problem}", usage, api_calls=1)
        self._cache.put(key, {"results": results})
        return RerankResult(_selections(results, candidates), usage=usage, api_calls=1)


def _malformed(results: Any, documents: int, top_k: int) -> str | None:
    """What is wrong with a rerank answer (indices out of range or repeated, scores not finite,
    more than asked for), or None when it can be used."""
    if not isinstance(results, list) or len(results) > top_k:
        return f"expected at most {top_k} results"
    seen: set[int] = set()
    for item in results:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], int)):
            return f"result {item!r} is not [index, score]"
        index, score = item
        if not 0 <= index < documents or index in seen:
            return f"index {index} is out of range or repeated ({documents} documents)"
        if not isinstance(score, int | float) or not math.isfinite(score):
            return f"score {score!r} for index {index} is not a finite number"
        seen.add(index)
    return None


def _selections(results: list[list[Any]], candidates: Sequence[RerankCandidate]) -> list[Selection]:
    return [
        Selection(entity_id=candidates[int(index)].entity_id, rank=rank, reason=f"relevance {score:.3f}")
        for rank, (index, score) in enumerate(results, start=1)
    ]


async def _gather_or_cancel(jobs: list[Coroutine[Any, Any, T]]) -> list[T]:
    """Run concurrently; on the first failure cancel the rest and raise it as is (a TaskGroup
    would wrap it in an ExceptionGroup, which callers catching ProviderError would miss)."""
    tasks = [asyncio.ensure_future(job) for job in jobs]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        raise


def _encode(vector: Vector) -> str:
    return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")


def _decode(text: str) -> Vector:
    return np.frombuffer(base64.b64decode(text), dtype="<f4").astype(np.float32)


def _stack(rows: list[Vector]) -> Vectors:
    """Rows as one L2-normalised float32 matrix (Voyage returns unit vectors; this makes sure)."""
    if not rows:
        return np.zeros((0, 0), dtype=np.float32)
    matrix = np.vstack(rows).astype(np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms == 0, 1.0, norms)).astype(np.float32)

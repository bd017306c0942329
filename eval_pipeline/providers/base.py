"""Interfaces of the system under test: embedders, rerankers and the semantic pipeline's parts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from eval_pipeline.core.errors import CouldNotEvaluate
from eval_pipeline.core.mechanisms.retrieval import NO_USAGE, Selection, Usage

# A reranker that caches a prompt prefix loads it: a run of the offline models builds no such model.
if TYPE_CHECKING:
    from eval_pipeline.providers.prompt_cache import PromptCacheStatus

InputType = Literal["query", "document"]
Vectors = npt.NDArray[np.float32]


class ProviderError(CouldNotEvaluate):
    """A call to the system under test failed for good (after retries); the test is errored. What
    was billed before it failed is kept (`usage`, `api_calls`; `batch_usage` at the batch discount),
    so cost is never under-reported."""

    def __init__(
        self, reason: str, usage: Usage | None = None, api_calls: int = 0, batch_usage: Usage | None = None
    ) -> None:
        super().__init__(reason)
        self.usage = usage or NO_USAGE
        self.api_calls = api_calls
        self.batch_usage = batch_usage or NO_USAGE


@dataclass(frozen=True)
class EmbedResult:
    vectors: Vectors  # shape (n, dim), L2-normalised rows
    usage: Usage = NO_USAGE
    api_calls: int = 0
    cache_hits: int = 0


class RerankCandidate(NamedTuple):
    """What a reranker sees of one candidate (a named tuple: immutable, and cheap to build by
    the thousand)."""

    entity_id: str
    title: str
    summary: str
    cosine: float


@dataclass(frozen=True)
class RerankResult:
    selections: list[Selection]
    usage: Usage = NO_USAGE  # billed at the online price
    api_calls: int = 0
    cache_hits: int = 0
    batch_usage: Usage = NO_USAGE  # billed at the batch discount


@dataclass(frozen=True)
class RerankRequest:
    query: str
    candidates: Sequence[RerankCandidate]
    top_k: int
    trial: int = 0


class Embedder(Protocol):
    name: str

    async def embed(self, texts: Sequence[str], input_type: InputType) -> EmbedResult: ...


class Reranker(Protocol):
    name: str

    async def rerank(
        self, query: str, candidates: Sequence[RerankCandidate], top_k: int, trial: int = 0
    ) -> RerankResult:
        """`trial` (0-based) is part of the response-cache key, so repeated trials of a
        non-deterministic reranker are separate calls rather than one cached answer."""
        ...


@runtime_checkable
class CatalogueReranker(Protocol):
    """A reranker whose stable prompt prefix lists the KB's rerankable entities (a catalogue)."""

    async def prepare(self, catalogue: Sequence[RerankCandidate]) -> PromptCacheStatus:
        """Lay the catalogue out as the cached prefix; say whether it meets the model's minimum."""
        ...


@runtime_checkable
class BatchReranker(Protocol):
    """A reranker that can answer many requests as one asynchronous batch (at a discount)."""

    async def rerank_batch(self, requests: Sequence[RerankRequest]) -> list[RerankResult | ProviderError]:
        """One outcome per request, in order; the same answers the online path would give."""
        ...

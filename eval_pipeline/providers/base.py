"""Interfaces of the system under test: embedders, rerankers and the semantic pipeline's parts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from eval_pipeline.core.mechanisms.retrieval import Candidate, Selection, Usage

InputType = Literal["query", "document"]
Vectors = npt.NDArray[np.float32]


class ProviderError(Exception):
    """A call to the system under test failed for good (after retries); the test is errored.

    `usage` and `api_calls` say what was billed before it failed, so cost is never under-reported.
    """

    def __init__(self, reason: str, usage: Usage | None = None, api_calls: int = 0) -> None:
        super().__init__(reason)
        self.usage = usage or Usage()
        self.api_calls = api_calls


@dataclass(frozen=True)
class EmbedResult:
    vectors: Vectors  # shape (n, dim), L2-normalised rows
    usage: Usage = field(default_factory=Usage)
    api_calls: int = 0
    cache_hits: int = 0


@dataclass(frozen=True)
class RerankCandidate:
    """What a reranker sees of one candidate."""

    entity_id: str
    title: str
    summary: str
    cosine: float


@dataclass(frozen=True)
class RerankResult:
    selections: list[Selection]
    usage: Usage = field(default_factory=Usage)
    api_calls: int = 0
    cache_hits: int = 0


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


__all__ = [
    "Candidate",
    "EmbedResult",
    "Embedder",
    "InputType",
    "ProviderError",
    "RerankCandidate",
    "RerankResult",
    "Reranker",
    "Selection",
    "Usage",
    "Vectors",
]

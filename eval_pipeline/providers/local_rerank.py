"""Offline rerankers: deterministic, free, 0 API calls.

`CosineReranker` keeps the embedding stage's order. `HybridReranker` adds lexical overlap with
the candidate's title and summary, and the KB's keyword boosts (an explicit mention). Both only
reorder the candidates they are given: an entity the embedding stage missed cannot be boosted in.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.core.mechanisms.pattern import keyword_regex
from eval_pipeline.core.mechanisms.retrieval import Selection
from eval_pipeline.providers.base import RerankCandidate, RerankResult

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_STOPWORD_TEXT = (
    "a an and are as at be but by can do does for from has have how i if in is it its me my no "
    "not of on or our so that the their them they this to was we what when where which who why "
    "will with you your"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
# BM25's usual constants: term-frequency saturation and length normalisation.
_K1 = 1.2
_B = 0.75


def tokens(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]


def _fmt(x: float) -> str:
    text = f"{x:.2f}"  # rounds the exact value half to even, as round(x, 2) does
    return "0.00" if text == "-0.00" else text


def _ranked(scored: Sequence[tuple[float, str]], top_k: int) -> list[tuple[float, str]]:
    """Highest score first; equal scores fall back to entity_id so the order is reproducible."""
    best = sorted([(-score, entity_id) for score, entity_id in scored])[:top_k]
    return [(-negated, entity_id) for negated, entity_id in best]


class CosineReranker:
    """The top_k candidates by cosine similarity: the embedding-only baseline. `jitter` > 0 adds
    Gaussian noise drawn from (seed, query, trial): a reproducible noisy system, for studying how
    the diff gate tells noise from change."""

    name = "cosine"

    def __init__(self, jitter: float = 0.0, seed: int = 0) -> None:
        self.jitter = jitter
        self.seed = seed

    def _noise(self, query: str, trial: int, n: int) -> list[float]:
        if not self.jitter:
            return [0.0] * n
        digest = hashlib.sha256(f"{self.seed}\0{trial}\0{query}".encode()).digest()
        rng = random.Random(int.from_bytes(digest[:8], "big"))
        return [rng.gauss(0.0, self.jitter) for _ in range(n)]

    async def rerank(
        self, query: str, candidates: Sequence[RerankCandidate], top_k: int, trial: int = 0
    ) -> RerankResult:
        noise = self._noise(query, trial, len(candidates))
        ranked = _ranked([(c.cosine + e, c.entity_id) for c, e in zip(candidates, noise, strict=True)], top_k)
        return RerankResult(
            selections=[
                Selection(eid, i, f"cos {_fmt(score)}") for i, (score, eid) in enumerate(ranked, start=1)
            ]
        )


class HybridWeights(BaseModel):
    """How much each signal adds to a candidate's score (cosine and lexical are in [0, 1])."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True, allow_inf_nan=False)

    cosine: float = Field(default=1.0, ge=0)
    lexical: float = Field(default=0.3, ge=0)
    # Large enough to lift an explicitly named topic above unrelated near neighbours.
    keyword: float = Field(default=0.5, ge=0)


def bm25_normalised(query: str, docs: Sequence[str]) -> list[float]:
    """BM25 of the query against each doc, with the docs as the corpus, scaled so the best is 1."""
    doc_tokens = [tokens(d) for d in docs]
    if not doc_tokens:
        return []
    avg_len = max(sum(len(t) for t in doc_tokens) / len(doc_tokens), 1.0)
    df = Counter(term for toks in doc_tokens for term in set(toks))
    query_terms = set(tokens(query))
    raw: list[float] = []
    for toks in doc_tokens:
        tf = Counter(toks)
        norm = _K1 * (1 - _B + _B * len(toks) / avg_len)
        raw.append(
            sum(
                math.log(1 + (len(docs) - df[t] + 0.5) / (df[t] + 0.5)) * tf[t] * (_K1 + 1) / (tf[t] + norm)
                for t in query_terms
                if tf[t]
            )
        )
    best = max(raw)
    return [r / best if best > 0 else 0.0 for r in raw]


class HybridReranker:
    """Score = w.cosine·cosine + w.lexical·BM25(title+summary) + w.keyword·[boost keyword hit]."""

    name = "hybrid"

    def __init__(
        self,
        keyword_boosts: Mapping[str, Sequence[str]],
        weights: HybridWeights | None = None,
    ) -> None:
        self.weights = weights or HybridWeights()
        self._keywords = dict(keyword_boosts)
        # An entity's keywords compile when it is first a candidate: a narrowed run reranks a
        # handful of the entities and need not compile every boost keyword.
        self._boosts: dict[str, list[tuple[str, re.Pattern[str]]]] = {}

    def _keyword_hit(self, entity_id: str, query: str) -> str | None:
        boosts = self._boosts.get(entity_id)
        if boosts is None:
            boosts = [(kw, keyword_regex(kw)) for kw in self._keywords.get(entity_id, ())]
            self._boosts[entity_id] = boosts
        return next((keyword for keyword, regex in boosts if regex.search(query)), None)

    async def rerank(
        self, query: str, candidates: Sequence[RerankCandidate], top_k: int, trial: int = 0
    ) -> RerankResult:
        del trial  # deterministic: every trial gives the same answer
        w = self.weights
        lexical = bm25_normalised(query, [f"{c.title} {c.summary}" for c in candidates])
        scores: dict[str, float] = {}
        reasons: dict[str, str] = {}
        for c, lex in zip(candidates, lexical, strict=True):
            parts = [f"cos {_fmt(w.cosine * c.cosine)}", f"lex {_fmt(w.lexical * lex)}"]
            boost = 0.0
            if (keyword := self._keyword_hit(c.entity_id, query)) is not None:
                boost = w.keyword
                parts.append(f"keyword '{keyword}' {_fmt(w.keyword)}")
            scores[c.entity_id] = w.cosine * c.cosine + w.lexical * lex + boost
            reasons[c.entity_id] = " + ".join(parts)
        ranked = _ranked([(score, eid) for eid, score in scores.items()], top_k)
        return RerankResult(
            selections=[Selection(eid, i, reasons[eid]) for i, (_, eid) in enumerate(ranked, start=1)]
        )

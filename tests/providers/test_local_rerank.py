"""Local rerankers: cosine order, hybrid lexical + keyword signals, reasons, tie-breaking."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import pytest

from eval_pipeline.providers.base import RerankCandidate, RerankResult
from eval_pipeline.providers.local_rerank import (
    CosineReranker,
    HybridReranker,
    HybridWeights,
    bm25_normalised,
    tokens,
)


def cand(entity_id: str, cosine: float, title: str = "Topic", summary: str = "About it") -> RerankCandidate:
    return RerankCandidate(entity_id=entity_id, title=title, summary=summary, cosine=cosine)


def hybrid(
    query: str,
    candidates: Sequence[RerankCandidate],
    boosts: Mapping[str, Sequence[str]] | None = None,
    weights: HybridWeights | None = None,
    top_k: int = 6,
) -> RerankResult:
    reranker = HybridReranker(boosts or {}, weights)
    return asyncio.run(reranker.rerank(query, candidates, top_k))


def ids(result: RerankResult) -> list[str]:
    return [s.entity_id for s in result.selections]


def test_cosine_keeps_embedding_order_and_cuts_to_top_k() -> None:
    candidates = [cand(f"e{i}", 0.9 - i * 0.05) for i in range(10)]
    result = asyncio.run(CosineReranker().rerank("q", candidates, 6))
    assert ids(result) == [f"e{i}" for i in range(6)]
    assert [s.rank for s in result.selections] == [1, 2, 3, 4, 5, 6]
    assert result.selections[0].reason == "cos 0.90"
    assert result.api_calls == 0 and result.cache_hits == 0


def test_cosine_ties_break_by_entity_id() -> None:
    result = asyncio.run(CosineReranker().rerank("q", [cand("b", 0.5), cand("a", 0.5)], 2))
    assert ids(result) == ["a", "b"]


def test_keyword_boost_lifts_a_named_topic_and_says_why() -> None:
    candidates = [cand("neighbour", 0.62), cand("gray_rock", 0.41), cand("other", 0.30)]
    result = hybrid("Should I try the Gray  Rock method?", candidates, {"gray_rock": ["gray rock"]})
    assert ids(result)[0] == "gray_rock"
    reason = result.selections[0].reason or ""
    assert reason.startswith("cos 0.41 + lex ") and "keyword 'gray rock' 0.50" in reason


def test_keyword_matches_whole_words_only() -> None:
    candidates = [cand("a_other", 0.5), cand("boundary_setting", 0.5)]
    boosts = {"boundary_setting": ["boundary"]}
    assert ids(hybrid("she is boundaryless", candidates, boosts))[0] == "a_other"
    assert ids(hybrid("what is a BOUNDARY?", candidates, boosts))[0] == "boundary_setting"


def test_lexical_overlap_breaks_equal_cosines() -> None:
    candidates = [
        cand("a_sleep", 0.5, "Sleep routines", "Bedtime across two homes"),
        cand("z_biff", 0.5, "BIFF responses", "Replying to hostile texts from an ex"),
    ]
    result = hybrid("how do I answer hostile texts", candidates)
    assert ids(result) == ["z_biff", "a_sleep"]
    assert "lex 0.30" in (result.selections[0].reason or "")


def test_weights_are_configurable() -> None:
    candidates = [cand("a", 0.6), cand("b", 0.4)]
    boosts = {"b": ["schedule"]}
    assert ids(hybrid("the schedule", candidates, boosts))[0] == "b"
    no_keyword = HybridWeights(keyword=0.0)
    assert ids(hybrid("the schedule", candidates, boosts, no_keyword))[0] == "a"


def test_hybrid_ties_break_by_entity_id_and_respect_top_k() -> None:
    candidates = [cand(name, 0.5) for name in ["d", "b", "c", "a"]]
    assert ids(hybrid("nothing in common", candidates, top_k=3)) == ["a", "b", "c"]


def test_bm25_scales_best_match_to_one() -> None:
    scores = bm25_normalised("custody schedule", ["custody schedule changes", "custody", "bread"])
    assert scores[0] == pytest.approx(1.0)
    assert 0 < scores[1] < 1 and scores[2] == 0.0
    assert bm25_normalised("anything", []) == []


def test_tokens_drop_stopwords_and_case() -> None:
    assert tokens("How do I stop The Fighting?") == ["stop", "fighting"]

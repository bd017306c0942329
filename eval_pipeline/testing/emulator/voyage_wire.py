"""The Voyage wire format: embeddings (hash vectors, float or base64) and rerank (relevance =
(1 + cosine of hash vectors) / 2)."""

from __future__ import annotations

import base64

import numpy as np
import numpy.typing as npt

from eval_pipeline.providers.prompt_cache import estimate_tokens
from eval_pipeline.testing.emulator.config import (
    EmulatorConfig,
    Json,
    Reply,
    Stats,
    hash_vector,
    json_reply,
)


def embeddings(request: Json, config: EmulatorConfig, stats: Stats) -> Reply:
    texts = request.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        return json_reply(400, {"detail": "input must be a string or a list of strings"})
    tokens = sum(estimate_tokens(t) for t in texts)
    if len(texts) > config.embed_max_texts:
        return json_reply(400, {"detail": f"at most {config.embed_max_texts} texts"})
    if tokens > config.embed_max_tokens:
        return json_reply(400, {"detail": f"at most {config.embed_max_tokens} tokens"})
    stats.embed_batch(len(texts), tokens)
    dim = int(request.get("output_dimension") or config.embed_dim)
    as_base64 = request.get("encoding_format") == "base64"
    data = [
        {"object": "embedding", "index": i, "embedding": _encode(hash_vector(t, dim), as_base64)}
        for i, t in enumerate(texts)
    ]
    return _list_reply(request, data, tokens)


def rerank(request: Json, config: EmulatorConfig) -> Reply:
    query = str(request.get("query", ""))
    documents = [str(d) for d in request.get("documents", [])]
    dim = config.embed_dim
    q = hash_vector(query, dim)
    scores = [(1.0 + float(q @ hash_vector(d, dim))) / 2.0 for d in documents]
    order = sorted(range(len(documents)), key=lambda i: -scores[i])
    top_k = request.get("top_k") or len(documents)
    tokens = estimate_tokens(query) * len(documents) + sum(map(estimate_tokens, documents))
    bad = config.rerank_bad_answer
    stray_index = len(documents) if bad == "out_of_range" else order[0] if bad == "repeated" else None
    data = [{"index": i, "relevance_score": scores[i]} for i in order[:top_k]]
    if stray_index is not None:
        data[-1] = {"index": stray_index, "relevance_score": 0.0}
    return _list_reply(request, data, tokens)


def _encode(vector: npt.NDArray[np.float32], as_base64: bool) -> object:
    if as_base64:
        return base64.b64encode(vector.astype("<f4").tobytes()).decode()
    return [float(x) for x in vector]


def _list_reply(request: Json, data: list[Json], tokens: int) -> Reply:
    """Voyage's envelope for embeddings and rerank results."""
    body = {"object": "list", "data": data, "model": request.get("model"), "usage": {"total_tokens": tokens}}
    return json_reply(200, body)

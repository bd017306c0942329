"""The system-under-test contract (docs/http_target.md): a deterministic service answer."""

from __future__ import annotations

from eval_pipeline.providers.spend_estimate import estimate_tokens
from eval_pipeline.testing.emulator.anthropic_wire import DEFAULT_TOP_K
from eval_pipeline.testing.emulator.config import EmulatorConfig, Json, hash_vector


def target_response(request: Json, config: EmulatorConfig) -> Json:
    """The HTTP-target contract, answered from hash similarity between message and entity id."""
    message = str(request.get("message", ""))
    dim = config.embed_dim
    q = hash_vector(message, dim)
    scored = sorted(((float(q @ hash_vector(e, dim)), e) for e in config.target_entities), reverse=True)
    candidates = scored[: int(request.get("top_k_candidates", 15))]
    top_k = int(request.get("top_k", DEFAULT_TOP_K))
    return {
        "candidates": [{"entity_id": e, "score": s} for s, e in candidates],
        "selections": [{"entity_id": e, "reason": "emulator pick"} for _, e in candidates[:top_k]],
        "triggered_handlers": [],
        "pattern_matches": [],
        "always_loaded": [],
        "usage": {"input_tokens": estimate_tokens(message), "output_tokens": 0},
    }

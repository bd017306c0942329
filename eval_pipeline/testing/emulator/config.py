"""The emulator's knobs (latency, rate limit, seeded faults), its reply type, request statistics,
and the deterministic stand-ins every route shares (hash vectors; tokens are counted as the dry
run estimates them)."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from bisect import bisect_right
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

import numpy as np
import numpy.typing as npt

# `cut_short`: the route's real reply, its Content-Length promised, half of the body sent, then the
# connection closed; `drop`: the connection closed with no reply at all.
FaultKind = Literal["500", "529", "timeout", "malformed", "429", "cut_short", "drop"]

ALL_FAULTS: tuple[FaultKind, ...] = get_args(FaultKind)

Json = dict[str, Any]

KEPT_BODIES = 1000  # recent request bodies kept for tests to inspect


@dataclass(frozen=True)
class EmulatorConfig:
    latency_ms: float = 0.0
    rpm: float | None = None  # accepted requests per rolling minute, over all model routes
    fault_rate: float = 0.0
    faults: tuple[FaultKind, ...] = ALL_FAULTS
    fault_routes: tuple[str, ...] = ()  # only these paths (e.g. "/v1/messages/count_tokens"); () = all
    seed: int = 0
    stall_s: float = 5.0  # a `timeout` fault holds the request this long: exceed the client timeout
    retry_after_s: int = 1  # sent with injected 429 faults
    # Faults at fixed places, whatever `fault_rate` draws: (path, n, kind) injects `kind` into the
    # n-th request (1-based) to that path, e.g. ("/v1/embeddings", 1, "malformed").
    fault_at: tuple[tuple[str, int, FaultKind], ...] = ()
    embed_dim: int = 256
    embed_max_texts: int = 1000
    embed_max_tokens: int = 120_000  # tokens estimated as chars / 4
    # The real API silently skips caching a prefix below the model's minimum. None: the per-model
    # table (`providers.prompt_cache`, else FALLBACK_CACHE_MIN_TOKENS); a number: for every model.
    cache_min_tokens: int | None = None
    batch_ready_s: float = 0.0  # a message batch stays in_progress this long
    target_entities: tuple[str, ...] = tuple(f"entity_{i:03d}" for i in range(60))
    # A rerank answer that parses but is wrong: "out_of_range" names a document that isn't there,
    # "repeated" names one document twice.
    rerank_bad_answer: str | None = None
    # A barrier over request `model` names: a request for one of them waits until each of them has
    # been asked for (so they must be in flight at once), else fails with 400 after the timeout.
    barrier: tuple[str, ...] = ()
    barrier_timeout_s: float = 20.0
    # (path, n): the first n requests to `path` each wait until all n have arrived (so they were in
    # flight at once), else fail with 400 after `barrier_timeout_s`; later requests pass.
    gather: tuple[str, int] | None = None


@dataclass
class Reply:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    wire: Literal["whole", "cut_short", "drop"] = "whole"  # how much of it leaves before the close


def json_reply(status: int, payload: object, headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, json.dumps(payload).encode(), headers=headers or {})


def hash_vector(text: str, dim: int) -> npt.NDArray[np.float32]:
    """A deterministic unit vector for `text` (identical texts embed identically)."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    vector = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return cast(npt.NDArray[np.float32], vector / np.linalg.norm(vector))


def unit_hash(*parts: object) -> tuple[float, int]:
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little") / 2**64, digest[8]


class Stats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.statuses: Counter[str] = Counter()
            self.faults: Counter[str] = Counter()
            self.embed_batches: list[dict[str, int]] = []
            # (route, body, monotonic seconds) of the recent JSON requests
            self.bodies: deque[tuple[str, Json, float]] = deque(maxlen=KEPT_BODIES)
            self.arrivals: list[tuple[str, float]] = []  # (route, monotonic seconds) of each request

    def request(self, route: str) -> None:
        with self._lock:
            self.arrivals.append((route, time.monotonic()))

    def peak(self, route: str, window_s: float = 60.0) -> int:
        """The most requests to `route` that arrived within any `window_s` seconds (a sliding
        window: what a provider's per-minute limit counts)."""
        with self._lock:
            times = [t for r, t in self.arrivals if r == route]
        # Each arrival ends a window holding the arrivals after its start (bisect: times are sorted).
        return max((end + 1 - bisect_right(times, t - window_s) for end, t in enumerate(times)), default=0)

    def status(self, route: str, status: int) -> None:
        with self._lock:
            self.statuses[str(status)] += 1
            self.statuses[f"{route} {status}"] += 1

    def fault(self, kind: str) -> None:
        with self._lock:
            self.faults[kind] += 1

    def body(self, route: str, request: Json) -> None:
        with self._lock:
            self.bodies.append((route, request, time.monotonic()))

    def span(self, model: str) -> tuple[float, float]:
        """When the first and the last recent request naming `model` arrived (monotonic seconds)."""
        with self._lock:
            times = [t for _, body, t in self.bodies if body.get("model") == model]
        return times[0], times[-1]

    def requests(self, route: str) -> list[Json]:
        """Recent JSON bodies POSTed to `route` (e.g. "/v1/messages"), oldest first."""
        with self._lock:
            return [body for r, body, _ in self.bodies if r == route]

    def embed_batch(self, texts: int, tokens: int) -> None:
        with self._lock:
            self.embed_batches.append({"texts": texts, "tokens": tokens})

    def snapshot(self) -> Json:
        with self._lock:
            return {
                "requests": dict(Counter(route for route, _ in self.arrivals)),
                "total_requests": len(self.arrivals),
                "statuses": dict(self.statuses),
                "faults": dict(self.faults),
                "embed_batches": list(self.embed_batches),
            }


ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def error_reply(family: str, status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
    if family == "anthropic":
        error = {"type": ERROR_TYPES.get(status, "api_error"), "message": message}
        return json_reply(status, {"type": "error", "error": error}, headers)
    if family == "voyage":
        return json_reply(status, {"detail": message}, headers)
    return json_reply(status, {"error": message}, headers)

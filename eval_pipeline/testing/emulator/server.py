"""A loopback test double of the Anthropic and Voyage HTTP APIs, and of the HTTP-target contract.

Tests and benchmarks point the real SDK clients at it (`base_url`); nothing is monkeypatched.
Its answers are deterministic stand-ins derived from hashes of the input, never model quality.
Routes: `_ROUTES` (the APIs' answers are in their wire modules, the target contract's here);
GET /_stats and POST /_reset control the emulator. Knobs: `EmulatorConfig`. A seeded fault is
drawn from a hash of (seed, route, request body, how many times that body was seen), so faults do
not depend on arrival order and a retry gets a fresh draw.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import replace
from http.server import BaseHTTPRequestHandler
from typing import Any

from eval_pipeline.providers.prompt_cache import estimate_tokens
from eval_pipeline.testing import LoopbackServer
from eval_pipeline.testing.emulator.anthropic_wire import DEFAULT_TOP_K, AnthropicApi
from eval_pipeline.testing.emulator.config import (
    EmulatorConfig,
    FaultKind,
    Json,
    Reply,
    Stats,
    error_reply,
    hash_vector,
    json_reply,
    unit_hash,
)
from eval_pipeline.testing.emulator.voyage_wire import embeddings, rerank

Route = Callable[["EmulatorHandle", Json], Reply]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs' pooled clients expect
    # Headers and body leave in two writes; with Nagle on, the body waits for the client's
    # delayed ACK on every keep-alive request.
    disable_nagle_algorithm = True
    server: EmulatorHandle

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: request lines would only clutter test output."""

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/_stats":
            self._send(json_reply(200, self.server.stats))
            return
        match = re.fullmatch(r"/v1/messages/batches/([\w-]+)(/results)?", path)
        if match is None:
            self._send(error_reply("anthropic", 404, f"no route GET {path}"))
            return
        label = f"GET /v1/messages/batches{match[2] or ''}"
        self.server.counts.request(label)
        self._send(self.server.anthropic.get_batch(match[1], bool(match[2])), label)

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if path == "/_reset":
            self.server.reset()
            self._send(json_reply(200, {"reset": True}))
            return
        route = _ROUTES.get(path)
        if route is None:
            self._send(error_reply("anthropic", 404, f"no route POST {path}"))
            return
        family, handler = route
        self.server.counts.request(f"POST {path}")
        self._send(self._serve(path, family, handler, body), f"POST {path}")

    def _serve(self, path: str, family: str, handler: Route, body: bytes) -> Reply:
        arrived = time.monotonic()
        if family != "target" and not (self.headers.get("x-api-key") or self.headers.get("authorization")):
            return error_reply(family, 401, "missing API key")
        wait = self.server.rate_limited()
        if wait is not None:
            headers = {"retry-after": str(max(1, math.ceil(wait)))}
            return error_reply(family, 429, "requests per minute exceeded", headers)
        reply = self._answer(path, family, handler, body)
        # The latency runs from arrival to answer: the emulator's own work (parsing, hashing,
        # building the reply) happens within it, as a real API's does, not on top of it.
        self.server.pause(self.server.config.latency_ms / 1000.0 - (time.monotonic() - arrived))
        return reply

    def _answer(self, path: str, family: str, handler: Route, body: bytes) -> Reply:
        emu = self.server
        try:
            request = json.loads(body or b"{}")
        except json.JSONDecodeError:
            return error_reply(family, 400, "body is not JSON")
        emu.counts.body(path, request)
        missing = emu.barrier_missing(request)
        if missing:  # 400: the SDKs do not retry it, so a missed barrier fails at once
            return error_reply(family, 400, f"emulated barrier: no request for {', '.join(missing)} came")
        if absent := emu.gather_missing(path):
            return error_reply(family, 400, f"emulated gather: {absent} request(s) to {path} never came")
        fault = emu.plan_fault(path, body)
        if fault is None:
            return handler(emu, request)
        if fault == "timeout":
            emu.pause(emu.config.stall_s)
            return error_reply(family, 504, "emulated stall")
        if fault == "429":
            return error_reply(
                family, 429, "emulated rate limit", {"retry-after": str(emu.config.retry_after_s)}
            )
        if fault in ("cut_short", "drop"):
            return replace(handler(emu, request), wire=fault)
        if fault == "malformed":
            if path == "/v1/messages":
                return json_reply(200, emu.anthropic.message(request, malformed=True))
            return Reply(200, b'{"data": [{"index": 0, ')
        return error_reply(family, int(fault), f"emulated {fault}")

    def _send(self, reply: Reply, label: str | None = None) -> None:
        if label is not None:
            self.server.counts.status(label, reply.status)
        if reply.wire == "drop":
            self.close_connection = True
            return
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            if reply.wire == "cut_short":
                self.wfile.write(reply.body[: len(reply.body) // 2])
                self.close_connection = True
            else:
                self.wfile.write(reply.body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout fired during a stall): nothing to deliver


class EmulatorHandle(LoopbackServer):
    """A running emulator and the state its handler threads share (config, counts, fault plan,
    rate window): `.base_url` (Anthropic style, no /v1), `.voyage_base_url` (with /v1),
    `.target_url`, `.stats`, `.counts`, `.reset()`, `.stop()`."""

    def __init__(self, port: int, config: EmulatorConfig) -> None:
        self.config = config
        self.counts = Stats()
        self.anthropic = AnthropicApi(self)
        self._lock = threading.Lock()
        self._seen: Counter[str] = Counter()
        self._arrivals: Counter[str] = Counter()  # requests per path, for `fault_at`
        self._accepted: deque[float] = deque()
        self._arrived = threading.Condition()
        self._models_seen: set[str] = set()
        self._gathered = 0  # requests to the `gather` path so far
        super().__init__(port, _Handler, "api-emulator")
        self.base_url: str = f"http://127.0.0.1:{self.port}"
        self.voyage_base_url = f"{self.base_url}/v1"
        self.target_url = f"{self.base_url}/target"

    @property
    def stats(self) -> Json:
        return self.counts.snapshot()

    def reconfigure(self, **changes: Any) -> None:
        """Change behaviour knobs between test phases (e.g. turn faults on)."""
        self.config = replace(self.config, **changes)

    def reset(self) -> None:
        self.counts.reset()
        self.anthropic.reset()
        with self._lock:
            self._seen.clear()
            self._arrivals.clear()
            self._accepted.clear()
        with self._arrived:
            self._models_seen.clear()
            self._gathered = 0

    def plan_fault(self, route: str, body: bytes) -> FaultKind | None:
        config = self.config
        with self._lock:
            self._arrivals[route] += 1
            nth = self._arrivals[route]
        placed = [kind for path, n, kind in config.fault_at if (path, n) == (route, nth)]
        if placed:
            self.counts.fault(placed[0])
            return placed[0]
        if config.fault_rate <= 0 or not config.faults:
            return None
        if config.fault_routes and route not in config.fault_routes:
            return None
        digest = hashlib.sha256(body).hexdigest()
        with self._lock:
            occurrence = self._seen[f"{route}:{digest}"]
            self._seen[f"{route}:{digest}"] += 1
        draw, pick = unit_hash(config.seed, route, digest, occurrence)
        if draw >= config.fault_rate:
            return None
        kind = config.faults[pick % len(config.faults)]
        self.counts.fault(kind)
        return kind

    def rate_limited(self) -> float | None:
        """Seconds until a slot frees in the rolling minute; None when the request is accepted."""
        if self.config.rpm is None:
            return None
        now = time.monotonic()
        with self._lock:
            while self._accepted and now - self._accepted[0] >= 60.0:
                self._accepted.popleft()
            if len(self._accepted) >= self.config.rpm:
                return 60.0 - (now - self._accepted[0])
            self._accepted.append(now)
        return None

    def barrier_missing(self, request: Json) -> list[str]:
        """For a request naming a barrier model: wait until every barrier model has been asked
        for; the ones that never were (empty: passed)."""
        parties = self.config.barrier
        model = request.get("model")
        if model not in parties:
            return []
        with self._arrived:
            self._models_seen.add(str(model))
            self._meet(lambda: self._models_seen >= set(parties))
            return sorted(set(parties) - self._models_seen)

    def gather_missing(self, route: str) -> int:
        """For one of the `gather` path's first n requests: wait until all n have arrived; how
        many never came (0: passed)."""
        if self.config.gather is None or self.config.gather[0] != route:
            return 0
        n = self.config.gather[1]
        with self._arrived:
            self._gathered += 1
            if self._gathered > n:
                return 0
            self._meet(lambda: self._gathered >= n)
            return max(0, n - self._gathered)

    def _meet(self, met: Callable[[], bool]) -> None:
        """(Holding `_arrived`) wake the other waiters, then wait until `met`, a timeout or the stop."""
        self._arrived.notify_all()
        self._arrived.wait_for(lambda: met() or self.stopping.is_set(), timeout=self.config.barrier_timeout_s)

    def pause(self, seconds: float) -> None:
        """Sleep, but wake at once when the server stops."""
        if seconds > 0:
            self.stopping.wait(seconds)


def _target_answer(request: Json, config: EmulatorConfig) -> Json:
    """The HTTP-target contract (docs/http_target.md), answered from hash similarity between
    message and entity id."""
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


_ROUTES: dict[str, tuple[str, Route]] = {
    "/v1/messages": ("anthropic", lambda s, r: json_reply(200, s.anthropic.message(r))),
    "/v1/messages/count_tokens": ("anthropic", lambda s, r: json_reply(200, s.anthropic.count_tokens(r))),
    "/v1/messages/batches": ("anthropic", lambda s, r: json_reply(200, s.anthropic.create_batch(r))),
    "/v1/embeddings": ("voyage", lambda s, r: embeddings(r, s.config, s.counts)),
    "/v1/rerank": ("voyage", lambda s, r: rerank(r, s.config)),
    "/target": ("target", lambda s, r: json_reply(200, _target_answer(r, s.config))),
}


def start_emulator(port: int = 0, **config: Any) -> EmulatorHandle:
    """Serve on 127.0.0.1 (`port=0`: any free port) from a background thread."""
    return EmulatorHandle(port, EmulatorConfig(**config))

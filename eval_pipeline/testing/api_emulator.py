"""A loopback test double of the Anthropic and Voyage HTTP APIs, and of the HTTP-target contract.

Tests and benchmarks point the real SDK clients at it (`base_url`); nothing is monkeypatched.
It is a test double: its selections, vectors and scores are deterministic stand-ins derived from
hashes of the input, never model quality.

Routes
  Anthropic  POST /v1/messages             forced tool use: selects the first N candidate ids listed
                                           in the prompt (`[entity_id] title: summary` lines; N from
                                           "at most N"), usage with prompt-cache accounting;
                                           a calibration request (JSON output whose schema has
                                           `expected_primary`) gets a thinking block and a valid
                                           proposal built from the SEMANTIC ids of the KB block
             POST /v1/messages/count_tokens
             POST /v1/messages/batches, GET /v1/messages/batches/{id}, GET .../{id}/results (JSONL)
  Voyage     POST /v1/embeddings           unit vectors from a hash of each text (base64 or float)
             POST /v1/rerank               relevance = (1 + cosine of hash vectors) / 2
  Target     POST /target                  the HTTP-target contract (docs/http_target.md)
  Control    GET /_stats, POST /_reset

Behaviour knobs (`EmulatorConfig`): latency, a requests-per-minute limit (429 + retry-after),
seeded fault injection over `500`, `529`, `timeout` (stall longer than the client's timeout),
`malformed` (tool input that fails validation or is not JSON; a calibration answer naming an
unknown entity, with an empty primary, or cut short; truncated JSON bodies elsewhere)
and `429`. A fault is drawn from a hash of (seed, route, request body, how many times that body
was seen), so a run's faults do not depend on arrival order and a retry gets a fresh draw.

Run standalone: `python -m eval_pipeline.testing.api_emulator --port 8765 --latency-ms 300`.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import math
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, cast, get_args

import numpy as np
import numpy.typing as npt

FaultKind = Literal["500", "529", "timeout", "malformed", "429"]
ALL_FAULTS: tuple[FaultKind, ...] = get_args(FaultKind)
Json = dict[str, Any]

_CANDIDATE_LINE = re.compile(r"^\[([a-z][a-z0-9_]*)\]", re.MULTILINE)
_TOP_K = re.compile(r"at most (\d+)")
_DEFAULT_TOP_K = 6
_KEPT_BODIES = 1000  # recent request bodies kept for tests to inspect


@dataclass(frozen=True)
class EmulatorConfig:
    latency_ms: float = 0.0
    rpm: float | None = None  # accepted requests per rolling minute, over all model routes
    fault_rate: float = 0.0
    faults: tuple[FaultKind, ...] = ALL_FAULTS
    seed: int = 0
    stall_s: float = 5.0  # a `timeout` fault holds the request this long: exceed the client timeout
    retry_after_s: int = 1  # sent with injected 429 faults
    embed_dim: int = 256
    embed_max_texts: int = 1000
    embed_max_tokens: int = 120_000  # tokens estimated as chars / 4
    cache_min_tokens: int = 0  # the real API silently skips caching prefixes below a model minimum
    batch_ready_s: float = 0.0  # a message batch stays in_progress this long
    target_entities: tuple[str, ...] = tuple(f"entity_{i:03d}" for i in range(60))
    # A rerank answer that parses but is wrong: "out_of_range" names a document that isn't there,
    # "repeated" names one document twice.
    rerank_bad_answer: str | None = None


@dataclass
class _Reply:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


def _json_reply(status: int, payload: object, headers: dict[str, str] | None = None) -> _Reply:
    return _Reply(status, json.dumps(payload).encode(), headers=headers or {})


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def hash_vector(text: str, dim: int) -> npt.NDArray[np.float32]:
    """A deterministic unit vector for `text` (identical texts embed identically)."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    vector = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return cast(npt.NDArray[np.float32], vector / np.linalg.norm(vector))


def _unit_hash(*parts: object) -> tuple[float, int]:
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little") / 2**64, digest[8]


class _Stats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.requests: Counter[str] = Counter()
            self.statuses: Counter[str] = Counter()
            self.faults: Counter[str] = Counter()
            self.embed_batches: list[dict[str, int]] = []
            self.bodies: deque[tuple[str, Json]] = deque(maxlen=_KEPT_BODIES)

    def request(self, route: str) -> None:
        with self._lock:
            self.requests[route] += 1

    def status(self, route: str, status: int) -> None:
        with self._lock:
            self.statuses[str(status)] += 1
            self.statuses[f"{route} {status}"] += 1

    def fault(self, kind: str) -> None:
        with self._lock:
            self.faults[kind] += 1

    def body(self, route: str, request: Json) -> None:
        with self._lock:
            self.bodies.append((route, request))

    def bodies_for(self, route: str) -> list[Json]:
        with self._lock:
            return [body for r, body in self.bodies if r == route]

    def embed_batch(self, texts: int, tokens: int) -> None:
        with self._lock:
            self.embed_batches.append({"texts": texts, "tokens": tokens})

    def snapshot(self) -> Json:
        with self._lock:
            return {
                "requests": dict(self.requests),
                "total_requests": sum(self.requests.values()),
                "statuses": dict(self.statuses),
                "faults": dict(self.faults),
                "embed_batches": list(self.embed_batches),
            }


class _Anthropic:
    """Messages, token counting, prompt-cache accounting and message batches."""

    def __init__(self, emulator: Emulator) -> None:
        self._emu = emulator
        self._lock = threading.Lock()
        self._cached_prefixes: set[str] = set()
        self._batches: dict[str, Json] = {}
        self._counter = 0

    def reset(self) -> None:
        with self._lock:
            self._cached_prefixes.clear()
            self._batches.clear()

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            self._counter += 1
            return f"{prefix}_emu_{self._counter:06d}"

    def message(self, request: Json, malformed: bool = False) -> Json:
        if _wants_proposal(request):
            return self._proposal_message(request, malformed)
        tool = _forced_tool(request)
        text = _user_text(request.get("messages", []))
        selection = _select(text)
        tool_input = _malformed_input(text, selection) if malformed else selection
        content: list[Json]
        if tool is None:
            content = [{"type": "text", "text": json.dumps(tool_input)}]
        else:
            content = [
                {
                    "type": "tool_use",
                    "id": self._next_id("toolu"),
                    "name": tool,
                    "input": tool_input,
                }
            ]
        return {
            "id": self._next_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": request.get("model", ""),
            "content": content,
            "stop_reason": "tool_use" if tool else "end_turn",
            "stop_sequence": None,
            "usage": self._usage(request, json.dumps(tool_input)),
        }

    def _proposal_message(self, request: Json, malformed: bool) -> Json:
        """A calibrator's answer: structured output as text, after an (empty) thinking block."""
        prompt = _user_text(request.get("messages", []))
        answer = (
            _malformed_proposal(prompt) if malformed else json.dumps(_propose(_system_text(request), prompt))
        )
        return {
            "id": self._next_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": request.get("model", ""),
            "content": [
                {"type": "thinking", "thinking": "", "signature": "emulator"},
                {"type": "text", "text": answer},
            ],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": self._usage(request, answer),
        }

    def _usage(self, request: Json, output: str) -> Json:
        prefix, rest = _split_cached_prefix(request)
        total = estimate_tokens(prefix + rest)
        prefix_tokens = estimate_tokens(prefix)
        created = read = 0
        if prefix and prefix_tokens >= self._emu.config.cache_min_tokens:
            key = hashlib.sha256((str(request.get("model")) + prefix).encode()).hexdigest()
            with self._lock:
                seen = key in self._cached_prefixes
                self._cached_prefixes.add(key)
            read, created = (prefix_tokens, 0) if seen else (0, prefix_tokens)
        long_ttl = _cache_ttl(request) == "1h"
        return {
            "input_tokens": total - created - read,
            "output_tokens": estimate_tokens(output),
            "cache_creation_input_tokens": created,
            "cache_read_input_tokens": read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": 0 if long_ttl else created,
                "ephemeral_1h_input_tokens": created if long_ttl else 0,
            },
        }

    def count_tokens(self, request: Json) -> Json:
        prefix, rest = _split_cached_prefix(request)
        return {"input_tokens": estimate_tokens(prefix + rest)}

    def create_batch(self, request: Json, base_url: str) -> Json:
        batch_id = self._next_id("msgbatch")
        results = [self._batch_result(item) for item in request.get("requests", [])]
        now = datetime.now(UTC)
        batch = {
            "id": batch_id,
            "created": now,
            "ready": now + timedelta(seconds=self._emu.config.batch_ready_s),
            "results": results,
            "results_url": f"{base_url}/v1/messages/batches/{batch_id}/results",
        }
        with self._lock:
            self._batches[batch_id] = batch
        return _batch_view(batch)

    def _batch_result(self, item: Json) -> Json:
        params = item.get("params", {})
        body = json.dumps(params, sort_keys=True).encode()
        fault = self._emu.plan_fault("batch", body)
        if fault is not None and fault != "malformed":
            error = {"type": "api_error", "message": f"emulated {fault} in batch"}
            result: Json = {"type": "errored", "error": {"type": "error", "error": error}}
        else:
            result = {"type": "succeeded", "message": self.message(params, fault == "malformed")}
        return {"custom_id": item.get("custom_id", ""), "result": result}

    def batch(self, batch_id: str) -> Json | None:
        with self._lock:
            batch = self._batches.get(batch_id)
        return None if batch is None else _batch_view(batch)

    def batch_results(self, batch_id: str) -> bytes | None:
        with self._lock:
            batch = self._batches.get(batch_id)
        if batch is None or datetime.now(UTC) < batch["ready"]:
            return None
        return "".join(json.dumps(r) + "\n" for r in batch["results"]).encode()


def _batch_view(batch: Json) -> Json:
    ended = datetime.now(UTC) >= batch["ready"]
    results = batch["results"]
    succeeded = sum(1 for r in results if r["result"]["type"] == "succeeded")
    counts = {
        "processing": 0 if ended else len(results),
        "succeeded": succeeded if ended else 0,
        "errored": len(results) - succeeded if ended else 0,
        "canceled": 0,
        "expired": 0,
    }
    return {
        "id": batch["id"],
        "type": "message_batch",
        "processing_status": "ended" if ended else "in_progress",
        "request_counts": counts,
        "created_at": batch["created"].isoformat(),
        "expires_at": (batch["created"] + timedelta(hours=24)).isoformat(),
        "ended_at": batch["ready"].isoformat() if ended else None,
        "archived_at": None,
        "cancel_initiated_at": None,
        "results_url": batch["results_url"] if ended else None,
    }


def _forced_tool(request: Json) -> str | None:
    choice = request.get("tool_choice") or {}
    if choice.get("type") == "tool":
        return str(choice["name"])
    tools = request.get("tools") or []
    return str(tools[0]["name"]) if tools else None


def _user_text(messages: list[Json]) -> str:
    """All user-visible text of the user turns (strings, text blocks, tool results)."""
    parts: list[str] = []
    for message in messages:
        if message.get("role") == "user":
            parts.extend(_texts(message.get("content", "")))
    return "\n".join(parts)


def _texts(content: object) -> Iterator[str]:
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, dict):
                if isinstance(block.get("text"), str):
                    yield block["text"]
                yield from _texts(block.get("content"))


def _select(prompt: str) -> Json:
    ids = list(dict.fromkeys(_CANDIDATE_LINE.findall(prompt)))
    match = _TOP_K.search(prompt)
    top_k = int(match.group(1)) if match else _DEFAULT_TOP_K
    return {
        "selections": [
            {"entity_id": entity_id, "reason": f"emulator pick {rank}"}
            for rank, entity_id in enumerate(ids[:top_k], start=1)
        ]
    }


def _malformed_input(prompt: str, selection: Json) -> Json:
    """Model output that fails validation: an unknown id and a duplicate, or a non-JSON string."""
    if _unit_hash(prompt)[1] % 2:
        return {"selections": '[{"entity_id": "' + prompt[:20]}
    picks = selection["selections"][:1]
    return {"selections": [{"entity_id": "not_a_candidate", "reason": "?"}, *picks, *picks]}


# Calibration requests (eval_pipeline.core.calibration.proposals): the KB block lists entities as
# `<entity id="…" type="…" load_mode="…">`; the user turn carries the current expectations as JSON.
_KB_SEMANTIC_ENTITY = re.compile(r'<entity id="([a-z][a-z0-9_]*)" type="[A-Z]+" load_mode="SEMANTIC">')
_CURRENT_EXPECTATIONS = re.compile(r"<current_expectations[^>]*>\s*(\{.*?\})\s*</current_expectations>", re.S)


def _wants_proposal(request: Json) -> bool:
    output_format = (request.get("output_config") or {}).get("format") or {}
    properties = (output_format.get("schema") or {}).get("properties") or {}
    return output_format.get("type") == "json_schema" and "expected_primary" in properties


def _system_text(request: Json) -> str:
    system = request.get("system") or []
    return system if isinstance(system, str) else "\n".join(str(b.get("text", "")) for b in system)


def _propose(system: str, prompt: str) -> Json:
    """Deterministic and valid: a third of the tests keep their current expectations; the rest
    keep the current primary and take secondaries and a not-expected from a hash order of the KB."""
    ids = sorted(
        dict.fromkeys(_KB_SEMANTIC_ENTITY.findall(system)),
        key=lambda e: hashlib.sha256(f"{prompt}:{e}".encode()).digest(),
    )
    match = _CURRENT_EXPECTATIONS.search(prompt)
    current: Json | None = json.loads(match.group(1)) if match else None
    if current is not None and _unit_hash("keep", prompt)[1] % 3 == 0:
        return {"reasoning": "emulator: current expectations kept", **current}
    primary = list(current["expected_primary"]) if current else ids[:1]
    rest = [e for e in ids if e not in primary]
    secondary = rest[:2]
    ranks = [{"higher": primary[0], "lower": secondary[0]}] if primary and secondary else []
    return {
        "reasoning": "emulator proposal",
        "expected_primary": primary,
        "expected_secondary": secondary,
        "not_expected": rest[2:3],
        "rank_check": ranks,
    }


def _malformed_proposal(prompt: str) -> str:
    """One of three bad answers: an unknown entity, an empty primary, or JSON cut short."""
    kind = _unit_hash("malformed", prompt)[1] % 3
    base: Json = {"reasoning": "emulator", "expected_secondary": [], "not_expected": [], "rank_check": []}
    if kind == 0:
        return json.dumps({**base, "expected_primary": ["not_a_kb_entity"]})
    if kind == 1:
        return json.dumps({**base, "expected_primary": []})
    return '{"reasoning": "emulator", "expected_primary": ["'


def _cache_ttl(request: Json) -> str:
    """The TTL of the last cache_control marker in system ("5m" when unset, as the API defaults)."""
    system = request.get("system") or []
    markers = [b["cache_control"] for b in system if isinstance(b, dict) and b.get("cache_control")]
    return str(markers[-1].get("ttl", "5m")) if markers else "5m"


def _split_cached_prefix(request: Json) -> tuple[str, str]:
    """(text up to the last cache_control marker in tools + system, everything else).

    The cacheable prefix renders tools, then system; messages are never cached here.
    """
    blocks: list[tuple[str, bool]] = []
    for tool in request.get("tools") or []:
        blocks.append((json.dumps(tool, sort_keys=True), bool(tool.get("cache_control"))))
    system = request.get("system") or []
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    for block in system:
        blocks.append((str(block.get("text", "")), bool(block.get("cache_control"))))
    marked = [i for i, (_, has_marker) in enumerate(blocks) if has_marker]
    cut = marked[-1] + 1 if marked else 0
    prefix = "".join(text for text, _ in blocks[:cut])
    rest = "".join(text for text, _ in blocks[cut:])
    return prefix, rest + json.dumps(request.get("messages", []), sort_keys=True)


class _Voyage:
    def __init__(self, emulator: Emulator) -> None:
        self._emu = emulator

    def embeddings(self, request: Json) -> _Reply:
        texts = request.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return _json_reply(400, {"detail": "input must be a string or a list of strings"})
        config = self._emu.config
        tokens = sum(estimate_tokens(t) for t in texts)
        if len(texts) > config.embed_max_texts:
            return _json_reply(400, {"detail": f"at most {config.embed_max_texts} texts"})
        if tokens > config.embed_max_tokens:
            return _json_reply(400, {"detail": f"at most {config.embed_max_tokens} tokens"})
        self._emu.stats.embed_batch(len(texts), tokens)
        dim = int(request.get("output_dimension") or config.embed_dim)
        as_base64 = request.get("encoding_format") == "base64"
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": _encode(hash_vector(t, dim), as_base64),
            }
            for i, t in enumerate(texts)
        ]
        return _json_reply(
            200,
            {
                "object": "list",
                "data": data,
                "model": request.get("model"),
                "usage": {"total_tokens": tokens},
            },
        )

    def rerank(self, request: Json) -> _Reply:
        query = str(request.get("query", ""))
        documents = [str(d) for d in request.get("documents", [])]
        dim = self._emu.config.embed_dim
        q = hash_vector(query, dim)
        scores = [(1.0 + float(q @ hash_vector(d, dim))) / 2.0 for d in documents]
        order = sorted(range(len(documents)), key=lambda i: -scores[i])
        top_k = request.get("top_k") or len(documents)
        tokens = estimate_tokens(query) * len(documents) + sum(map(estimate_tokens, documents))
        bad = self._emu.config.rerank_bad_answer
        stray_index = len(documents) if bad == "out_of_range" else order[0] if bad == "repeated" else None
        data = [{"index": i, "relevance_score": scores[i]} for i in order[:top_k]]
        if stray_index is not None:
            data[-1] = {"index": stray_index, "relevance_score": 0.0}
        return _json_reply(
            200,
            {
                "object": "list",
                "data": data,
                "model": request.get("model"),
                "usage": {"total_tokens": tokens},
            },
        )


def _encode(vector: npt.NDArray[np.float32], as_base64: bool) -> object:
    if as_base64:
        return base64.b64encode(vector.astype("<f4").tobytes()).decode()
    return [float(x) for x in vector]


def target_response(request: Json, entities: tuple[str, ...], dim: int) -> Json:
    """The HTTP-target contract, answered from hash similarity between message and entity id."""
    message = str(request.get("message", ""))
    q = hash_vector(message, dim)
    scored = sorted(((float(q @ hash_vector(e, dim)), e) for e in entities), reverse=True)
    candidates = scored[: int(request.get("top_k_candidates", 15))]
    top_k = int(request.get("top_k", _DEFAULT_TOP_K))
    return {
        "candidates": [{"entity_id": e, "score": s} for s, e in candidates],
        "selections": [{"entity_id": e, "reason": "emulator pick"} for _, e in candidates[:top_k]],
        "triggered_handlers": [],
        "pattern_matches": [],
        "always_loaded": [],
        "usage": {"input_tokens": estimate_tokens(message), "output_tokens": 0},
    }


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


class Emulator:
    """State shared by the server's handler threads: config, stats, fault plan, rate window."""

    def __init__(self, config: EmulatorConfig) -> None:
        self.config = config
        self.stats = _Stats()
        self.stopping = threading.Event()
        self.anthropic = _Anthropic(self)
        self.voyage = _Voyage(self)
        self._lock = threading.Lock()
        self._seen: Counter[str] = Counter()
        self._accepted: deque[float] = deque()

    def reset(self) -> None:
        self.stats.reset()
        self.anthropic.reset()
        with self._lock:
            self._seen.clear()
            self._accepted.clear()

    def plan_fault(self, route: str, body: bytes) -> FaultKind | None:
        config = self.config
        if config.fault_rate <= 0 or not config.faults:
            return None
        digest = hashlib.sha256(body).hexdigest()
        with self._lock:
            occurrence = self._seen[f"{route}:{digest}"]
            self._seen[f"{route}:{digest}"] += 1
        draw, pick = _unit_hash(config.seed, route, digest, occurrence)
        if draw >= config.fault_rate:
            return None
        kind = config.faults[pick % len(config.faults)]
        self.stats.fault(kind)
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

    def pause(self, seconds: float) -> None:
        """Sleep, but wake at once when the server stops."""
        if seconds > 0:
            self.stopping.wait(seconds)


Route = Callable[["_Handler", Json], _Reply]


def _error(family: str, status: int, message: str, headers: dict[str, str] | None = None) -> _Reply:
    if family == "anthropic":
        error = {"type": _ERROR_TYPES.get(status, "api_error"), "message": message}
        return _json_reply(status, {"type": "error", "error": error}, headers)
    if family == "voyage":
        return _json_reply(status, {"detail": message}, headers)
    return _json_reply(status, {"error": message}, headers)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs' pooled clients expect
    # Headers and body leave in two writes; with Nagle on, the body waits ~40 ms for the client's
    # delayed ACK on every keep-alive request.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: request lines would only clutter test output."""

    @property
    def emu(self) -> Emulator:
        return self.server.emulator

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/_stats":
            self._send(_json_reply(200, self.emu.stats.snapshot()))
            return
        match = re.fullmatch(r"/v1/messages/batches/([\w-]+)(/results)?", path)
        if match is None:
            self._send(_error("anthropic", 404, f"no route GET {path}"))
            return
        label = f"GET /v1/messages/batches{'/results' if match[2] else ''}"
        self.emu.stats.request(label)
        self._send(self._batch_get(match[1], bool(match[2])), label)

    def _batch_get(self, batch_id: str, results: bool) -> _Reply:
        if results:
            body = self.emu.anthropic.batch_results(batch_id)
            if body is None:
                return _error("anthropic", 404, "batch unknown or not ended")
            return _Reply(200, body, content_type="application/binary")
        batch = self.emu.anthropic.batch(batch_id)
        return _error("anthropic", 404, "unknown batch") if batch is None else _json_reply(200, batch)

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if path == "/_reset":
            self.emu.reset()
            self._send(_json_reply(200, {"reset": True}))
            return
        route = _ROUTES.get(path)
        if route is None:
            self._send(_error("anthropic", 404, f"no route POST {path}"))
            return
        family, handler = route
        self.emu.stats.request(f"POST {path}")
        self._send(self._serve(path, family, handler, body), f"POST {path}")

    def _serve(self, path: str, family: str, handler: Route, body: bytes) -> _Reply:
        if family != "target" and not self._has_key():
            return _error(family, 401, "missing API key")
        wait = self.emu.rate_limited()
        if wait is not None:
            headers = {"retry-after": str(max(1, math.ceil(wait)))}
            return _error(family, 429, "requests per minute exceeded", headers)
        self.emu.pause(self.emu.config.latency_ms / 1000.0)
        try:
            request = json.loads(body or b"{}")
        except json.JSONDecodeError:
            return _error(family, 400, "body is not JSON")
        self.emu.stats.body(path, request)
        fault = self.emu.plan_fault(path, body)
        if fault is None:
            return handler(self, request)
        return self._fault(fault, family, handler, request)

    def _fault(self, fault: FaultKind, family: str, handler: Route, request: Json) -> _Reply:
        if fault == "timeout":
            self.emu.pause(self.emu.config.stall_s)
            return _error(family, 504, "emulated stall")
        if fault == "429":
            headers = {"retry-after": str(self.emu.config.retry_after_s)}
            return _error(family, 429, "emulated rate limit", headers)
        if fault == "malformed":
            if handler is _messages:
                return _json_reply(200, self.emu.anthropic.message(request, malformed=True))
            return _Reply(200, b'{"data": [{"index": 0, ')
        return _error(family, int(fault), f"emulated {fault}")

    def _has_key(self) -> bool:
        return bool(self.headers.get("x-api-key") or self.headers.get("authorization"))

    def _send(self, reply: _Reply, label: str | None = None) -> None:
        if label is not None:
            self.emu.stats.status(label, reply.status)
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(reply.body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout fired during a stall): nothing to deliver


def _messages(handler: _Handler, request: Json) -> _Reply:
    return _json_reply(200, handler.emu.anthropic.message(request))


def _count_tokens(handler: _Handler, request: Json) -> _Reply:
    return _json_reply(200, handler.emu.anthropic.count_tokens(request))


def _create_batch(handler: _Handler, request: Json) -> _Reply:
    return _json_reply(200, handler.emu.anthropic.create_batch(request, handler.base_url))


def _embeddings(handler: _Handler, request: Json) -> _Reply:
    return handler.emu.voyage.embeddings(request)


def _rerank(handler: _Handler, request: Json) -> _Reply:
    return handler.emu.voyage.rerank(request)


def _target(handler: _Handler, request: Json) -> _Reply:
    config = handler.emu.config
    return _json_reply(200, target_response(request, config.target_entities, config.embed_dim))


_ROUTES: dict[str, tuple[str, Route]] = {
    "/v1/messages": ("anthropic", _messages),
    "/v1/messages/count_tokens": ("anthropic", _count_tokens),
    "/v1/messages/batches": ("anthropic", _create_batch),
    "/v1/embeddings": ("voyage", _embeddings),
    "/v1/rerank": ("voyage", _rerank),
    "/target": ("target", _target),
}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default listen backlog of 5 drops concurrent connects, which the client
    # retries a second later: a 16-way burst would stall on it.
    request_queue_size = 128

    def __init__(self, port: int, emulator: Emulator) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.emulator = emulator


class EmulatorHandle:
    """A running emulator: `.base_url` (Anthropic style, no /v1), `.voyage_base_url` (with /v1),
    `.target_url`, `.stats`, `.reset()`, `.stop()`; also a context manager."""

    def __init__(self, server: _Server, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread
        host, port = server.server_address[:2]
        self.port = int(port)
        self.base_url = f"http://{host!s}:{self.port}"
        self.voyage_base_url = f"{self.base_url}/v1"
        self.target_url = f"{self.base_url}/target"

    @property
    def emulator(self) -> Emulator:
        return self._server.emulator

    @property
    def stats(self) -> Json:
        return self.emulator.stats.snapshot()

    def requests(self, path: str) -> list[Json]:
        """Recent JSON bodies POSTed to `path` (e.g. "/v1/messages"), oldest first."""
        return self.emulator.stats.bodies_for(path)

    def reconfigure(self, **changes: Any) -> None:
        """Change behaviour knobs between test phases (e.g. turn faults on)."""
        self.emulator.config = replace(self.emulator.config, **changes)

    def reset(self) -> None:
        self.emulator.reset()

    def stop(self) -> None:
        self.emulator.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> EmulatorHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_emulator(port: int = 0, **config: Any) -> EmulatorHandle:
    """Serve on 127.0.0.1 (`port=0`: any free port) from a background thread."""
    server = _Server(port, Emulator(EmulatorConfig(**config)))
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.02},  # how long stop() waits for the serving loop to notice
        name="api-emulator",
        daemon=True,
    )
    thread.start()
    return EmulatorHandle(server, thread)


def _parse_faults(text: str) -> tuple[FaultKind, ...]:
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in ALL_FAULTS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown fault kinds {unknown}; choose from {ALL_FAULTS}")
    return cast(tuple[FaultKind, ...], kinds)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--rpm", type=float, default=None)
    parser.add_argument("--fault-rate", type=float, default=0.0)
    parser.add_argument("--faults", type=_parse_faults, default=ALL_FAULTS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stall-s", type=float, default=5.0)
    parser.add_argument("--embed-dim", type=int, default=256)
    args = parser.parse_args(argv)
    handle = start_emulator(
        port=args.port,
        latency_ms=args.latency_ms,
        rpm=args.rpm,
        fault_rate=args.fault_rate,
        faults=args.faults,
        seed=args.seed,
        stall_s=args.stall_s,
        embed_dim=args.embed_dim,
    )
    print(f"api emulator listening on {handle.base_url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        handle.stop()


if __name__ == "__main__":
    main()

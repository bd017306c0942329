"""The Anthropic Messages wire format: forced tool use (the first N candidate ids listed in the
prompt, N from "at most N"), prompt-cache accounting, count_tokens, batches (results as JSONL),
and for a calibration request (JSON output whose schema has `expected_primary`) a thinking block
and a valid proposal from the SEMANTIC ids of the prompt's KB block."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from eval_pipeline.providers.prompt_cache import estimate_tokens, minimum_cacheable_tokens
from eval_pipeline.testing.emulator.config import (
    Json,
    Reply,
    error_reply,
    json_reply,
    unit_hash,
)

if TYPE_CHECKING:
    from eval_pipeline.testing.emulator.server import EmulatorHandle

_CANDIDATE_LINE = re.compile(r"^\[([a-z][a-z0-9_]*)\]", re.MULTILINE)

_TOP_K = re.compile(r"at most (\d+)")

DEFAULT_TOP_K = 6
# The smallest minimum of a current Sonnet/Opus 4.x model, for model ids the table does not know.
FALLBACK_CACHE_MIN_TOKENS = 1024


class AnthropicApi:
    """Messages, token counting, prompt-cache accounting and message batches."""

    def __init__(self, emulator: EmulatorHandle) -> None:
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
        prompt = _user_text(request.get("messages", []))
        if _wants_proposal(request):  # a calibrator's: structured output after a thinking block
            system = _system_text(request)
            answer = _malformed_proposal(prompt) if malformed else json.dumps(_propose(system, prompt))
            thinking = {"type": "thinking", "thinking": "", "signature": "emulator"}
            return self._reply(request, [thinking, {"type": "text", "text": answer}], "end_turn", answer)
        tool = _forced_tool(request)
        selection = _select(prompt)
        tool_input = _malformed_input(prompt, selection) if malformed else selection
        text = json.dumps(tool_input)
        if tool is None:
            return self._reply(request, [{"type": "text", "text": text}], "end_turn", text)
        call = {"type": "tool_use", "id": self._next_id("toolu"), "name": tool, "input": tool_input}
        return self._reply(request, [call], "tool_use", text)

    def _reply(self, request: Json, content: list[Json], stop_reason: str, output: str) -> Json:
        return {
            "id": self._next_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": request.get("model", ""),
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": self._usage(request, output),
        }

    def _usage(self, request: Json, output: str) -> Json:
        prefix, rest, ttl = _split_cached_prefix(request)
        total = estimate_tokens(prefix + rest)
        prefix_tokens = estimate_tokens(prefix)
        created = read = 0
        if prefix and prefix_tokens >= self._cache_minimum(str(request.get("model", ""))):
            key = hashlib.sha256((str(request.get("model")) + prefix).encode()).hexdigest()
            with self._lock:
                seen = key in self._cached_prefixes
                self._cached_prefixes.add(key)
            read, created = (prefix_tokens, 0) if seen else (0, prefix_tokens)
        long_ttl = ttl == "1h"
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

    def _cache_minimum(self, model: str) -> int:
        configured = self._emu.config.cache_min_tokens
        return (
            minimum_cacheable_tokens(model) or FALLBACK_CACHE_MIN_TOKENS if configured is None else configured
        )

    def count_tokens(self, request: Json) -> Json:
        prefix, rest, _ = _split_cached_prefix(request)
        return {"input_tokens": estimate_tokens(prefix + rest)}

    def create_batch(self, request: Json) -> Json:
        batch_id = self._next_id("msgbatch")
        results = [self._batch_result(item) for item in request.get("requests", [])]
        now = datetime.now(UTC)
        batch = {
            "id": batch_id,
            "created": now,
            "ready": now + timedelta(seconds=self._emu.config.batch_ready_s),
            "results": results,
            "results_url": f"{self._emu.base_url}/v1/messages/batches/{batch_id}/results",
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

    def get_batch(self, batch_id: str, results: bool) -> Reply:
        """The batch, or (`results`) its results as JSONL once it has ended."""
        with self._lock:
            batch = self._batches.get(batch_id)
        if batch is None or (results and datetime.now(UTC) < batch["ready"]):
            return error_reply("anthropic", 404, "batch unknown or not ended" if results else "unknown batch")
        if not results:
            return json_reply(200, _batch_view(batch))
        body = "".join(json.dumps(r) + "\n" for r in batch["results"]).encode()
        return Reply(200, body, content_type="application/binary")


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
    return "\n".join(t for m in messages if m.get("role") == "user" for t in _texts(m.get("content", "")))


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
    top_k = int(match.group(1)) if match else DEFAULT_TOP_K
    return {
        "selections": [
            {"entity_id": entity_id, "reason": f"emulator pick {rank}"}
            for rank, entity_id in enumerate(ids[:top_k], start=1)
        ]
    }


def _malformed_input(prompt: str, selection: Json) -> Json:
    """Model output that fails validation: an unknown id and a duplicate, or a non-JSON string."""
    if unit_hash(prompt)[1] % 2:
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
    if current is not None and unit_hash("keep", prompt)[1] % 3 == 0:
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
    kind = unit_hash("malformed", prompt)[1] % 3
    base: Json = {"reasoning": "emulator", "expected_secondary": [], "not_expected": [], "rank_check": []}
    if kind == 0:
        return json.dumps({**base, "expected_primary": ["not_a_kb_entity"]})
    if kind == 1:
        return json.dumps({**base, "expected_primary": []})
    return '{"reasoning": "emulator", "expected_primary": ["'


def _split_cached_prefix(request: Json) -> tuple[str, str, str]:
    """(text up to the last cache_control marker in tools + system, everything else, that
    marker's TTL: "5m" when unset, as the API defaults). The cacheable prefix renders tools, then
    system; messages are never cached here."""
    system = request.get("system") or []
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    blocks = [
        (json.dumps(tool, sort_keys=True), tool.get("cache_control")) for tool in request.get("tools") or []
    ]
    blocks += [(str(block.get("text", "")), block.get("cache_control")) for block in system]
    marked = [i for i, (_, marker) in enumerate(blocks) if marker]
    cut = marked[-1] + 1 if marked else 0
    ttl = str(blocks[cut - 1][1].get("ttl", "5m")) if marked else "5m"
    prefix = "".join(text for text, _ in blocks[:cut])
    rest = "".join(text for text, _ in blocks[cut:])
    return prefix, rest + json.dumps(request.get("messages", []), sort_keys=True), ttl

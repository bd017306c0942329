"""The emulator speaks the wire formats the real SDKs expect, deterministically."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import numpy as np
import pytest
from voyageai.client_async import AsyncClient as VoyageClient

from eval_pipeline.providers.prompt_cache import estimate_tokens
from eval_pipeline.testing.emulator.config import hash_vector
from eval_pipeline.testing.emulator.server import EmulatorHandle, start_emulator
from tests.providers.conftest import FAKE_ANTHROPIC_KEY, FAKE_VOYAGE_KEY, STALL_S

pytestmark = pytest.mark.anyio

PROMPT = "Candidates:\n[alpha] A: a\n[beta] B: b\n[gamma] C: c\n\nSelect at most 2 entities."
# 2500 x 8 characters: 5000 tokens at the emulator's 4 characters a token, above every minimum.
SYSTEM = [{"type": "text", "text": "Rerank. " * 2500, "cache_control": {"type": "ephemeral"}}]
TOOL = {"name": "select_entities", "input_schema": {"type": "object", "properties": {}}}


def _claude(emu: EmulatorHandle) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(api_key=FAKE_ANTHROPIC_KEY, base_url=emu.base_url, max_retries=0)


def _voyage(emu: EmulatorHandle) -> VoyageClient:
    return VoyageClient(api_key=FAKE_VOYAGE_KEY, base_url=emu.voyage_base_url, max_retries=1)


def _message_params(
    prompt: str = PROMPT, model: str = "claude-haiku-4-5", system: list[dict[str, Any]] = SYSTEM
) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 200,
        "system": system,
        "tools": [TOOL],
        "tool_choice": {"type": "tool", "name": "select_entities"},
        "messages": [{"role": "user", "content": prompt}],
    }


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=5) as client:
        yield client


def _post(http: httpx.Client, emu: EmulatorHandle, path: str, body: object) -> httpx.Response:
    return http.post(emu.base_url + path, json=body, headers={"x-api-key": "k"})


async def test_messages_forced_tool_use_and_prompt_cache_accounting(emulator: EmulatorHandle) -> None:
    async with _claude(emulator) as client:
        first = await client.messages.create(**_message_params())
        second = await client.messages.create(**_message_params(PROMPT.replace("[gamma]", "[delta]")))
    block = first.content[0]
    assert block.type == "tool_use" and block.name == "select_entities"
    assert [s["entity_id"] for s in block.input["selections"]] == ["alpha", "beta"]
    assert first.usage.cache_creation_input_tokens and not first.usage.cache_read_input_tokens
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert not second.usage.cache_creation_input_tokens


@pytest.mark.parametrize(
    ("model", "minimum"),
    [
        ("claude-haiku-4-5", 4096),
        ("claude-haiku-4-5-20251001", 4096),
        ("claude-opus-4-5", 4096),
        ("claude-opus-4-6", 4096),
        ("claude-sonnet-4-5", 1024),
        ("claude-opus-5-5", 512),
        ("some-future-model", 1024),  # not in the table: the emulator's fallback
    ],
)
async def test_each_model_caches_only_from_its_minimum_prefix(
    emulator: EmulatorHandle, model: str, minimum: int
) -> None:
    """The tool definition sits in the prefix too, so the system text is sized to make the whole
    prefix exactly `minimum` tokens, then one token short of it."""
    tool_tokens = estimate_tokens(json.dumps(TOOL, sort_keys=True))
    marker = {"cache_control": {"type": "ephemeral"}}
    at = [{"type": "text", "text": "x" * 4 * (minimum - tool_tokens), **marker}]
    below = [{"type": "text", "text": "y" * 4 * (minimum - tool_tokens - 1), **marker}]
    async with _claude(emulator) as client:
        reads = []
        for system in (at, at, below, below):
            message = await client.messages.create(**_message_params(model=model, system=system))
            reads.append((message.usage.cache_creation_input_tokens, message.usage.cache_read_input_tokens))
    assert reads == [(minimum, 0), (0, minimum), (0, 0), (0, 0)]


async def test_a_configured_minimum_applies_to_every_model() -> None:
    with start_emulator(cache_min_tokens=100_000) as emu:
        async with _claude(emu) as client:
            result = await client.messages.create(**_message_params(model="claude-sonnet-4-5"))
    assert not result.usage.cache_creation_input_tokens and not result.usage.cache_read_input_tokens


async def test_gather_holds_a_paths_first_requests_until_all_have_come() -> None:
    with start_emulator(gather=("/v1/messages", 3), barrier_timeout_s=10.0) as emu:
        async with _claude(emu) as client:
            together = await asyncio.gather(*(client.messages.create(**_message_params()) for _ in range(3)))
            later = await client.messages.create(**_message_params())  # past the first 3: not held
    assert [m.stop_reason for m in [*together, later]] == ["tool_use"] * 4
    with start_emulator(gather=("/v1/messages", 2), barrier_timeout_s=0.1) as emu:
        async with _claude(emu) as client:
            await client.messages.count_tokens(model="claude-haiku-4-5", messages=[])  # another path
            with pytest.raises(anthropic.BadRequestError, match="emulated gather: 1 request"):
                await client.messages.create(**_message_params())  # alone: the second never came


async def test_count_tokens_and_batches(emulator: EmulatorHandle) -> None:
    requests: list[Any] = [{"custom_id": f"r{i}", "params": _message_params()} for i in range(3)]
    async with _claude(emulator) as client:
        counted = await client.messages.count_tokens(
            model="claude-haiku-4-5", messages=[{"role": "user", "content": PROMPT}]
        )
        batch = await client.messages.batches.create(requests=requests)
        ended = await client.messages.batches.retrieve(batch.id)
        results = [r async for r in await client.messages.batches.results(batch.id)]
    assert counted.input_tokens > 0
    assert ended.processing_status == "ended" and ended.request_counts.succeeded == 3
    assert sorted(r.custom_id for r in results) == ["r0", "r1", "r2"]
    assert all(r.result.type == "succeeded" for r in results)


def test_batch_stays_in_progress_until_ready(http: httpx.Client) -> None:
    with start_emulator(batch_ready_s=30.0) as emu:
        created = _post(http, emu, "/v1/messages/batches", {"requests": []}).json()
        assert created["processing_status"] == "in_progress" and created["results_url"] is None
        results = http.get(f"{emu.base_url}/v1/messages/batches/{created['id']}/results")
        assert results.status_code == 404


async def test_embeddings_are_deterministic_unit_vectors(
    emulator: EmulatorHandle, http: httpx.Client
) -> None:
    result = await _voyage(emulator).embed(["hello", "world"], model="voyage-3.5", input_type="query")
    vectors = np.asarray(result.embeddings, dtype=np.float32)
    assert vectors.shape == (2, 256)
    np.testing.assert_allclose(vectors[0], hash_vector("hello", 256), rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert result.total_tokens > 0
    plain = _post(http, emulator, "/v1/embeddings", {"input": "hello", "model": "m"}).json()
    assert plain["data"][0]["embedding"] == pytest.approx(vectors[0].tolist(), rel=1e-6)


def test_embedding_caps_are_enforced(http: httpx.Client) -> None:
    with start_emulator(embed_max_texts=2, embed_max_tokens=5) as emu:
        too_many = _post(http, emu, "/v1/embeddings", {"input": ["a", "b", "c"], "model": "m"})
        too_long = _post(http, emu, "/v1/embeddings", {"input": ["x" * 40], "model": "m"})
    assert too_many.status_code == 400 and too_long.status_code == 400
    assert "detail" in too_many.json()


async def test_rerank_orders_by_relevance(emulator: EmulatorHandle) -> None:
    documents = ["apples", "the query itself", "pears"]
    result = await _voyage(emulator).rerank("the query itself", documents, model="rerank-2.5", top_k=2)
    assert result.results[0].index == 1 and len(result.results) == 2
    assert result.results[0].relevance_score >= result.results[1].relevance_score


def test_rpm_limit_answers_429_with_retry_after(http: httpx.Client) -> None:
    with start_emulator(rpm=2) as emu:
        codes = [_post(http, emu, "/v1/rerank", {"query": "q", "documents": ["d"]}) for _ in range(3)]
    assert [c.status_code for c in codes] == [200, 200, 429]
    assert 1 <= int(codes[2].headers["retry-after"]) <= 60


def test_missing_key_is_401(http: httpx.Client) -> None:
    with start_emulator() as emu:
        response = http.post(emu.base_url + "/v1/messages", json={})
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"


def _statuses(http: httpx.Client, emu: EmulatorHandle, n: int) -> list[int]:
    return [
        _post(http, emu, "/v1/rerank", {"query": f"q{i}", "documents": ["d"]}).status_code for i in range(n)
    ]


def test_faults_are_seeded_and_reproducible(http: httpx.Client) -> None:
    config: dict[str, Any] = {"fault_rate": 0.5, "faults": ("500", "529", "429"), "seed": 7}
    with start_emulator(**config) as emu:
        first = _statuses(http, emu, 30)
        emu.reset()
        again = _statuses(http, emu, 30)
        stats = emu.stats
    with start_emulator(**{**config, "seed": 8}) as other:
        different = _statuses(http, other, 30)
    assert first == again != different
    assert {500, 529, 429} <= set(first) and 200 in first
    assert sum(stats["faults"].values()) == sum(1 for s in again if s != 200)


def test_malformed_and_timeout_faults(http: httpx.Client) -> None:
    with start_emulator(fault_rate=1.0, faults=("malformed",)) as emu:
        body = _post(http, emu, "/v1/embeddings", {"input": ["a"], "model": "m"})
        assert body.status_code == 200
        with pytest.raises(json.JSONDecodeError):
            body.json()
    # The stall outlasts any test: only the client's own timeout can end the call.
    with start_emulator(fault_rate=1.0, faults=("timeout",), stall_s=STALL_S) as emu:
        with pytest.raises(httpx.ReadTimeout):
            http.post(emu.base_url + "/v1/rerank", json={}, headers={"x-api-key": "k"}, timeout=0.2)
        assert emu.stats["faults"] == {"timeout": 1}


def test_stats_and_reset_over_http(emulator: EmulatorHandle, http: httpx.Client) -> None:
    _post(http, emulator, "/v1/rerank", {"query": "q", "documents": ["d"]})
    stats = http.get(emulator.base_url + "/_stats").json()
    assert stats["requests"]["POST /v1/rerank"] == 1 and stats["statuses"]["200"] == 1
    assert emulator.counts.requests("/v1/rerank") == [{"query": "q", "documents": ["d"]}]
    http.post(emulator.base_url + "/_reset")
    assert emulator.stats["total_requests"] == 0


def test_command_line_server() -> None:
    port = _free_port()
    command = [sys.executable, "-m", "eval_pipeline.testing.emulator", "--port", str(port)]
    command += ["--latency-ms", "1", "--fault-rate", "0", "--faults", "500,timeout"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            assert f"127.0.0.1:{port}" in process.stdout.readline()
            assert httpx.get(f"http://127.0.0.1:{port}/_stats", timeout=5).status_code == 200
        finally:
            process.terminate()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])

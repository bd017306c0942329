"""HttpTarget / SystemPipeline against loopback services implementing (or breaking) the
contract in docs/http_target.md."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.contract import ContractViolation, SystemRequest, parse_answer
from eval_pipeline.core.inputs.stage_depths import CANDIDATE_K, SELECTION_K
from eval_pipeline.providers.api_base import ApiAccess
from eval_pipeline.providers.cache import EmbeddingStore, ResponseCache
from eval_pipeline.providers.circuit import BreakerSettings
from eval_pipeline.providers.factory import build_pipeline
from eval_pipeline.providers.models import FaultSettings, ModelConfig
from eval_pipeline.providers.ratelimit import RetryPolicy, ScaledClock
from eval_pipeline.providers.system_target import HttpTarget, SystemPipeline
from eval_pipeline.providers.target import RetrievalItem
from eval_pipeline.testing.emulator.config import ALL_FAULTS
from eval_pipeline.testing.emulator.server import EmulatorHandle, start_emulator
from tests.providers.conftest import CLIENT_TIMEOUT_S, SAFE_TIMEOUT_S, STALL_S, make_entities

pytestmark = pytest.mark.anyio


@pytest.fixture
async def target(emulator: EmulatorHandle) -> AsyncIterator[HttpTarget]:
    client = HttpTarget(
        ApiAccess(base_url=emulator.target_url, clock=ScaledClock(200.0), timeout_s=SAFE_TIMEOUT_S)
    )
    yield client
    await client.aclose()


def _valid(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "candidates": [{"entity_id": "a", "score": 0.9}, {"entity_id": "b", "score": 0.8}],
        "selections": [{"entity_id": "a", "reason": "best"}, {"entity_id": "b"}],
    }
    return {**body, **changes}


def test_contract_defaults_and_unknown_fields() -> None:
    response = parse_answer(_valid(extra_field=1), Mechanism.SEMANTIC)
    assert response.triggered_handlers is None and response.pattern_matches is None
    assert response.always_loaded is None and response.usage is None


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (_valid(selections=[{"entity_id": "a"}, {"entity_id": "a"}]), "duplicate selections"),
        (_valid(selections=[{"entity_id": str(i)} for i in range(7)]), "selections"),
        ({"selections": []}, "candidates: required for a semantic request"),
        (_valid(candidates=[{"entity_id": "a", "score": "high"}]), "candidates.0.score"),
        ([1, 2], "response"),
    ],
)
def test_contract_violations_are_named(body: object, problem: str) -> None:
    with pytest.raises(ContractViolation, match=f"breaks the contract: .*{problem}"):
        parse_answer(body, Mechanism.SEMANTIC)


@pytest.mark.parametrize(
    ("mechanism", "field"),
    [
        (Mechanism.STATE, "triggered_handlers"),
        (Mechanism.PATTERN, "pattern_matches"),
        (Mechanism.ALWAYS, "always_loaded"),
    ],
)
def test_each_mechanism_needs_its_own_part_of_the_answer(mechanism: Mechanism, field: str) -> None:
    # A semantic answer is no answer to a state question: silence must not score as "nothing fired".
    with pytest.raises(ContractViolation, match=f"{field}: required for a {mechanism.value} request"):
        parse_answer(_valid(), mechanism)
    assert parse_answer({field: []}, mechanism).candidates is None


async def test_ask_sends_the_contract_request(emulator: EmulatorHandle, target: HttpTarget) -> None:
    request = SystemRequest(
        mechanism=Mechanism.SEMANTIC,
        message="my child won't sleep",
        user_type="PARENT",
        user_state={"child_age": 4},
    )
    response = await target.ask(request)
    assert len(response.candidates or []) == CANDIDATE_K and len(response.selections or []) == SELECTION_K
    assert emulator.counts.requests("/target") == [
        {
            "contract_version": 2,
            "mechanism": "semantic",
            "message": "my child won't sleep",
            "user_type": "PARENT",
            "user_state": {"child_age": 4},
            "top_k_candidates": CANDIDATE_K,
            "top_k": SELECTION_K,
        }
    ]


async def test_each_test_is_sent_as_its_own_user(emulator: EmulatorHandle, target: HttpTarget) -> None:
    pipeline = SystemPipeline("svc", target, concurrency=1)
    items = [
        RetrievalItem("t1", "rent is late", 0, "TENANT", {"months_behind": 2}),
        RetrievalItem("t2", "who do i call", 0),
    ]
    await pipeline.retrieve_many(items)
    sent = [(r["user_type"], r["user_state"]) for r in emulator.counts.requests("/target")]
    assert sent == [("TENANT", {"months_behind": 2}), (None, {})]  # no sample default is made up


async def test_pipeline_maps_the_response(target: HttpTarget) -> None:
    pipeline = SystemPipeline("my-service", target, concurrency=4)
    report = await pipeline.prepare(make_entities(3))
    assert report.entities == 0 and report.api_calls == 0
    result = await pipeline.retrieve("t1", "a question", trial=2)
    assert result.status == "ok" and result.model == "my-service" and result.trial == 2
    assert [s.rank for s in result.selections] == list(range(1, SELECTION_K + 1))
    assert result.selected_ids == result.candidate_ids[:SELECTION_K]  # the emulator's choice
    assert result.usage.input_tokens > 0 and result.api_calls == 1


async def test_94_requests_with_20_percent_faults() -> None:
    placed = tuple(("/target", n, kind) for n, kind in enumerate(ALL_FAULTS, start=1))  # each kind met
    with start_emulator(fault_rate=0.2, fault_at=placed, seed=2, stall_s=STALL_S) as emu:
        access = ApiAccess(
            base_url=emu.target_url,
            clock=ScaledClock(50.0),
            policy=RetryPolicy(max_attempts=2),
            timeout_s=CLIENT_TIMEOUT_S,
            # Every fault is retried here: on a loaded machine the first wave's faults could
            # otherwise arrive in a row and open the breaker (tested on its own elsewhere).
            faults=FaultSettings(breaker=BreakerSettings(failures=100)),
        )
        flaky = HttpTarget(access)
        pipeline = SystemPipeline("svc", flaky, concurrency=16)
        done: list[str] = []
        items = [RetrievalItem(f"t{i:02d}", f"question {i}") for i in range(94)]
        results = await pipeline.retrieve_many(items, on_done=lambda r: done.append(r.test_id))
        await flaky.aclose()
        faults = emu.stats["faults"]
    assert [r.test_id for r in results] == [item.test_id for item in items]
    assert sorted(done) == sorted(item.test_id for item in items)
    assert set(faults) == set(ALL_FAULTS)
    errored = [r for r in results if r.status == "errored"]
    assert errored and len(errored) < 94
    assert all(
        (r.error or "").startswith("target: ") and "after 2 attempts" in (r.error or "") for r in errored
    ), {r.error for r in errored}


class _BrokenService(BaseHTTPRequestHandler):
    """Answers valid JSON that breaks the contract (selections repeat an entity)."""

    calls = 0

    def do_POST(self) -> None:
        type(self).calls += 1
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps(_valid(selections=[{"entity_id": "a"}] * 2)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def broken_service() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _BrokenService)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/retrieve"
    server.shutdown()
    server.server_close()
    thread.join()


async def test_contract_violation_errors_without_retrying(broken_service: str) -> None:
    target = HttpTarget(ApiAccess(base_url=broken_service, timeout_s=SAFE_TIMEOUT_S))
    result = await SystemPipeline("svc", target, 1).retrieve("t1", "q")
    await target.aclose()
    assert result.status == "errored" and _BrokenService.calls == 1
    assert result.error == "target: target response breaks the contract: duplicate selections"


async def test_build_pipeline_makes_an_http_target(
    emulator: EmulatorHandle, cache: ResponseCache, tmp_path: Path
) -> None:
    cfg = ModelConfig.model_validate(
        {
            "key": "my-service",
            "system": {
                "kind": "http",
                "url": emulator.target_url,
                "timeout_s": 5,
                "mechanisms": ["semantic"],
            },
        }
    )
    pipeline = build_pipeline(cfg, cache, EmbeddingStore(tmp_path / "store"), {})
    assert isinstance(pipeline, SystemPipeline)
    result = await pipeline.retrieve("t1", "q")
    await pipeline.target.aclose()
    assert result.status == "ok" and len(result.selections) == SELECTION_K

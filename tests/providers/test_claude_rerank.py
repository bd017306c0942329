"""ClaudeReranker against the emulator through the real anthropic SDK, alone and in a pipeline."""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Protocol

import pytest

from eval_pipeline.core.inputs.stage_depths import SELECTION_K
from eval_pipeline.providers.api_base import ApiAccess
from eval_pipeline.providers.base import ProviderError, RerankCandidate
from eval_pipeline.providers.cache import EmbeddingStore, ResponseCache
from eval_pipeline.providers.claude_rerank import (
    SYSTEM_PROMPT,
    TOOL_NAME,
    ClaudeReranker,
    InvalidSelectionError,
    _Invalid,
    render_candidates,
    validate_answer,
)
from eval_pipeline.providers.factory import build_pipeline
from eval_pipeline.providers.models import EmbedderConfig, ModelConfig, RerankerConfig
from eval_pipeline.providers.pricing import Price, cost_usd
from eval_pipeline.providers.ratelimit import Clock, RateLimiter, RetryPolicy, ScaledClock
from eval_pipeline.providers.semantic_pipeline import SemanticPipeline
from eval_pipeline.providers.target import RetrievalItem
from eval_pipeline.providers.voyage import VoyageEmbedder
from eval_pipeline.testing.emulator.config import ALL_FAULTS
from eval_pipeline.testing.emulator.server import EmulatorHandle, start_emulator
from tests.providers.conftest import (
    CLIENT_TIMEOUT_S,
    FAKE_ANTHROPIC_KEY,
    FAKE_VOYAGE_KEY,
    SAFE_TIMEOUT_S,
    STALL_S,
    RecordingClock,
    make_entities,
    point_sdks_at,
)

pytestmark = pytest.mark.anyio

HAIKU = Price(input=1.0, output=5.0, cache_write=1.25, cache_read=0.1)


class RerankerFactory(Protocol):
    def __call__(
        self,
        emu: EmulatorHandle,
        clock: Clock,
        limiter: RateLimiter | None = None,
        policy: RetryPolicy | None = None,
        timeout_s: float = SAFE_TIMEOUT_S,
    ) -> ClaudeReranker: ...


@pytest.fixture
async def make_reranker(cache: ResponseCache) -> AsyncIterator[RerankerFactory]:
    made: list[ClaudeReranker] = []

    def make(
        emu: EmulatorHandle,
        clock: Clock,
        limiter: RateLimiter | None = None,
        policy: RetryPolicy | None = None,
        timeout_s: float = SAFE_TIMEOUT_S,
    ) -> ClaudeReranker:
        access = ApiAccess(FAKE_ANTHROPIC_KEY, emu.base_url, limiter, clock, policy, timeout_s)
        reranker = ClaudeReranker("claude-haiku-4-5", access, cache, "rerank-test-1")
        made.append(reranker)
        return reranker

    yield make
    for reranker in made:
        await reranker.aclose()


def _candidates(n: int = 15, offset: int = 0) -> list[RerankCandidate]:
    return [
        RerankCandidate(f"topic_{i:03d}", f"Topic {i}", f"About topic {i}.", 0.9 - i / 100)
        for i in range(offset, offset + n)
    ]


# --- validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool_input", "message"),
    [
        ({"selections": [{"entity_id": "x", "reason": "r"}]}, "not among the candidates: x"),
        ({"selections": [{"entity_id": "a"}, {"entity_id": "a"}]}, "chosen more than once: a"),
        ({"selections": []}, "0 entities chosen, allowed 1 to 2"),
        ({"selections": [{"entity_id": i} for i in "abc"]}, "3 entities chosen, allowed 1 to 2"),
        ({"selections": '[{"entity_id": "a"'}, "the input must be"),
        ("not an object", "the input must be"),
    ],
)
def test_validation_errors_are_actionable(tool_input: object, message: str) -> None:
    with pytest.raises(_Invalid, match=message):
        validate_answer(tool_input, ["a", "b", "c"], top_k=2)


def test_valid_answer_keeps_order_and_reasons() -> None:
    picks = validate_answer(
        {"selections": [{"entity_id": "c", "reason": "best"}, {"entity_id": "a"}]}, "abc", 2
    )
    assert [(p.entity_id, p.reason) for p in picks] == [("c", "best"), ("a", None)]


def test_prompt_lists_candidates_one_per_line() -> None:
    text = render_candidates("help?", [RerankCandidate("a_b", "T\nitle", "S  um", 0.1)], 6)
    assert "[a_b] T itle: S um" in text and "at most 6 entities" in text and "help?" in text


# --- calls through the SDK ----------------------------------------------------------------


async def test_selects_with_forced_tool_use_and_a_marked_prefix_too_short_to_cache(
    emulator: EmulatorHandle, make_reranker: RerankerFactory, clock: RecordingClock
) -> None:
    # Without a catalogue (no prepare) the prefix is the tool and instructions, far below Haiku
    # 4.5's 4096-token minimum: the emulator, like the API, caches nothing.
    reranker = make_reranker(emulator, clock)
    first = await reranker.rerank("what about topic 3?", _candidates(), SELECTION_K)
    assert [s.entity_id for s in first.selections] == [f"topic_{i:03d}" for i in range(6)]
    assert [s.rank for s in first.selections] == [1, 2, 3, 4, 5, 6] and first.api_calls == 1
    second = await reranker.rerank("another question", _candidates(offset=20), SELECTION_K)
    for usage in (first.usage, second.usage):
        assert (usage.cache_creation_input_tokens, usage.cache_read_input_tokens) == (0, 0)
        assert cost_usd(usage, HAIKU) == pytest.approx(
            (usage.input_tokens * 1.0 + usage.output_tokens * 5.0) / 1e6
        )

    sent = emulator.counts.requests("/v1/messages")[0]
    assert sent["system"] == [{"type": "text", "text": SYSTEM_PROMPT, "cache_control": {"type": "ephemeral"}}]
    assert sent["tool_choice"] == {"type": "tool", "name": TOOL_NAME}
    assert sent["tools"][0]["name"] == TOOL_NAME and sent["tools"][0]["strict"] is True
    assert "[topic_003] Topic 3: About topic 3." in sent["messages"][0]["content"]


async def test_warm_cache_makes_no_calls_and_trials_are_separate(
    emulator: EmulatorHandle, make_reranker: RerankerFactory, clock: RecordingClock
) -> None:
    reranker = make_reranker(emulator, clock)
    cold = await reranker.rerank("q", _candidates(), SELECTION_K)
    warm = await reranker.rerank("q", _candidates(), SELECTION_K)
    assert warm.selections == cold.selections
    assert warm.cache_hits == 1 and warm.api_calls == 0 and warm.usage.input_tokens == 0
    assert emulator.stats["total_requests"] == 1
    await reranker.rerank("q", _candidates(), SELECTION_K, trial=1)
    assert emulator.stats["total_requests"] == 2


async def test_invalid_output_is_repaired_once(make_reranker: RerankerFactory, clock: RecordingClock) -> None:
    outcomes = []
    with start_emulator(fault_rate=0.5, faults=("malformed",), seed=11) as emu:
        reranker = make_reranker(emu, clock)
        for i in range(16):
            try:
                result = await reranker.rerank(f"question {i}", _candidates(), SELECTION_K)
                outcomes.append(("ok", result.api_calls))
            except InvalidSelectionError as exc:
                assert str(exc).startswith("invalid selection after repair: ")
                outcomes.append(("errored", exc.api_calls))
    assert ("ok", 1) in outcomes and ("ok", 2) in outcomes  # first try, and after a repair
    assert all(calls <= 2 for _, calls in outcomes)


async def test_repair_shows_the_error_then_gives_up(
    make_reranker: RerankerFactory, clock: RecordingClock
) -> None:
    with start_emulator(fault_rate=1.0, faults=("malformed",)) as emu:
        reranker = make_reranker(emu, clock)
        with pytest.raises(InvalidSelectionError) as info:
            await reranker.rerank("question", _candidates(), SELECTION_K)
        sent = emu.counts.requests("/v1/messages")
    assert len(sent) == 2 and info.value.api_calls == 2
    assert info.value.usage.output_tokens > 0  # what the failed attempt cost is kept
    assert str(info.value).startswith("invalid selection after repair: ")
    repair = sent[1]["messages"]
    assert [m["role"] for m in repair] == ["user", "assistant", "user"]
    feedback = repair[2]["content"]
    assert isinstance(feedback, list) and feedback[0]["type"] == "tool_result"
    assert feedback[0]["is_error"] is True and "That selection is invalid" in feedback[0]["content"]


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("500", "HTTP 500 after 5 attempts"),
        ("529", "HTTP 529 after 5 attempts"),
        ("429", "HTTP 429 after 5 attempts"),
        # Five timeouts in a row are the breaker's default: the service is declared down.
        ("timeout", "service down: {url} (5 calls in a row unreachable)"),
        # Connected, then the reply broke off: retried, never counted as the service being down.
        ("cut_short", "connection dropped after 5 attempts"),
        ("drop", "connection dropped after 5 attempts"),
    ],
)
async def test_each_fault_kind_is_retried_then_reported(
    fault: str, reason: str, make_reranker: RerankerFactory, clock: RecordingClock
) -> None:
    with start_emulator(fault_rate=1.0, faults=(fault,), stall_s=STALL_S) as emu:
        with pytest.raises(ProviderError) as info:
            reranker = make_reranker(emu, clock, timeout_s=CLIENT_TIMEOUT_S)
            await reranker.rerank("q", _candidates(), SELECTION_K)
        assert emu.stats["requests"]["POST /v1/messages"] == 5
    assert str(info.value) == reason.format(url=emu.base_url) and FAKE_ANTHROPIC_KEY not in str(info.value)
    if fault == "429":  # retry-after: 1 honoured, plus at most 1 s of jitter
        # …but never sooner than the backoff: max(1, 1·2^k) + jitter.
        assert len(clock.sleeps) == 4
        assert all(2.0**k <= s <= 2.0**k + 1.0 for k, s in enumerate(clock.sleeps))


# --- in the semantic pipeline -------------------------------------------------------------


async def test_94_queries_with_20_percent_faults_of_every_kind(
    make_reranker: RerankerFactory, cache: ResponseCache, tmp_path: Path
) -> None:
    clock = ScaledClock(50.0)  # backoff and retry-after waits take milliseconds
    policy = RetryPolicy(max_attempts=2)  # few attempts, so some tests do end errored
    with start_emulator(stall_s=STALL_S, seed=5) as emu:
        reranker = make_reranker(emu, clock, RateLimiter(6000, 16, clock=clock), policy, CLIENT_TIMEOUT_S)
        voyage = ApiAccess(FAKE_VOYAGE_KEY, emu.voyage_base_url, None, clock, policy, CLIENT_TIMEOUT_S)
        embedder = VoyageEmbedder("voyage-3.5", voyage, cache)
        pipeline = SemanticPipeline(
            "api-test",
            embedder,
            reranker,
            EmbeddingStore(tmp_path / "store"),
            16,
            embed_cost=partial(cost_usd, price=Price(input=0.06)),
            rerank_cost=partial(cost_usd, price=HAIKU),
        )
        await pipeline.prepare(make_entities(60))
        # The 20% drawn by request body are which requests the batching and retries make, and those
        # depend on timing: every kind is also placed once, so each is met on a loaded machine too.
        placed = tuple(("/v1/messages", n, kind) for n, kind in enumerate(ALL_FAULTS, start=1))
        emu.reconfigure(fault_rate=0.2, fault_at=placed)
        items = [RetrievalItem(f"t{i:03d}", f"question number {i} about topic {i % 60}") for i in range(94)]
        results = await pipeline.retrieve_many(items)
        faults = emu.stats["faults"]
    assert [r.test_id for r in results] == [item.test_id for item in items]
    assert set(faults) == set(ALL_FAULTS)
    ok = [r for r in results if r.status == "ok"]
    errored = [r for r in results if r.status == "errored"]
    assert len(ok) + len(errored) == 94 and ok and errored
    assert all(len(r.selections) == SELECTION_K and r.error is None for r in ok)
    for result in errored:
        stage, _, reason = (result.error or "").partition(": ")
        assert stage in {"embed", "rerank"} and reason, result.error


async def test_build_pipeline_wires_the_api_providers(
    cache: ResponseCache, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with start_emulator() as emu:
        point_sdks_at(emu, monkeypatch)
        cfg = ModelConfig(
            key="voyage-haiku",
            embedder=EmbedderConfig(kind="voyage", model_id="voyage-3.5"),
            reranker=RerankerConfig(kind="claude", model_id="claude-haiku-4-5"),
            rate_limit_per_min=6000,
        )
        pipeline = build_pipeline(cfg, cache, EmbeddingStore(tmp_path / "store"), {})
        await pipeline.prepare(make_entities(20))
        result = await pipeline.retrieve("t1", "what about topic 4?")
    assert result.status == "ok", result.error
    assert len(result.candidates) == 15 and len(result.selections) == SELECTION_K
    assert result.cost_usd > 0 and result.api_calls == 2


async def test_a_failed_repair_call_still_counts_the_first_calls_usage(
    make_reranker: RerankerFactory, clock: RecordingClock
) -> None:
    # Each request draws "malformed" or "500" from its seed; find the seed where the first answer
    # is invalid (so a repair call follows) and the repair call itself fails.
    policy = RetryPolicy(max_attempts=1)
    for seed in range(40):
        emu = start_emulator(fault_rate=1.0, faults=("malformed", "500"), seed=seed)
        with emu, pytest.raises(ProviderError) as caught:
            await make_reranker(emu, clock, policy=policy).rerank("q", _candidates(), 6)
        if str(caught.value).startswith("repair call failed"):
            break
    else:
        pytest.fail("no seed gave an invalid first answer and a failed repair")
    assert caught.value.api_calls == 1 and caught.value.usage.input_tokens > 0

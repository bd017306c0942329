"""The calibrator against the emulator through the real anthropic SDK (nothing monkeypatched)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any, get_args

import pytest
from anthropic.types.model import Model

from eval_pipeline.core.calibration.prompt import OUTPUT_SCHEMA, SYSTEM_INSTRUCTIONS, kb_text, user_turn
from eval_pipeline.core.calibration.proposals import CallRecord, judge
from eval_pipeline.core.calibration.records import cache_read_coverage
from eval_pipeline.core.expectations.resolution import resolve
from eval_pipeline.core.inputs.banks import SemanticTest
from eval_pipeline.core.inputs.kb import KnowledgeBase
from eval_pipeline.core.inputs.loading import Banks
from eval_pipeline.core.inputs.validation import load_validated
from eval_pipeline.core.mechanisms.retrieval import Usage
from eval_pipeline.providers.calibrator import (
    DEFAULT_MODEL,
    CalibrationPrompt,
    Calibrator,
    CalibratorConfigError,
    TokenCount,
    api_key_from_env,
    calibrator_access,
    calls_cost,
    estimate_cost,
    newest_opus,
)
from eval_pipeline.providers.models import FaultSettings, WaitLimits
from eval_pipeline.providers.pricing import BATCH_DISCOUNT, Price, cost_usd, lookup_price
from eval_pipeline.providers.ratelimit import RateLimiter, RetryPolicy, ScaledClock
from eval_pipeline.testing.emulator.server import EmulatorHandle
from tests.providers.conftest import FAKE_ANTHROPIC_KEY

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]
TENANT = REPO / "tests" / "fixtures" / "tenant_domain"
# Real Claude models skip caching below a minimum prefix length (4096 tokens for recent Opus
# models); the emulator enforces the same floor so the test shows caching is actually reached.
CACHE_MIN_TOKENS = 4096

Factory = Callable[..., Calibrator]


@cache
def _data(kb_path: Path, banks: Path) -> tuple[KnowledgeBase, Banks]:
    return load_validated(kb_path, banks)


def _prompts(
    kb_path: Path, banks_dir: Path
) -> tuple[KnowledgeBase, list[SemanticTest], list[CalibrationPrompt]]:
    kb, banks = _data(kb_path, banks_dir)
    assert banks.semantic is not None
    tests = banks.semantic.tests
    resolved = resolve(tests, banks.history)
    return kb, tests, [CalibrationPrompt(t.test_id, user_turn(t, resolved[t.test_id])) for t in tests]


def sample() -> tuple[KnowledgeBase, list[SemanticTest], list[CalibrationPrompt]]:
    """The sample KB (74 entities, ~28k tokens) and its 94 semantic tests: read only."""
    return _prompts(REPO / "kb", REPO / "test_banks")


def tenant() -> tuple[KnowledgeBase, list[SemanticTest], list[CalibrationPrompt]]:
    return _prompts(TENANT / "kb.yaml", TENANT / "banks")


@pytest.fixture
async def make(emulator: EmulatorHandle) -> AsyncIterator[Factory]:
    made: list[Calibrator] = []

    def factory(policy: RetryPolicy | None = None, **kwargs: Any) -> Calibrator:
        clock = ScaledClock(1000.0)  # backoff and polling waits take ~no real time
        access = replace(
            calibrator_access(FAKE_ANTHROPIC_KEY, RateLimiter(60_000, 8, clock)),
            base_url=emulator.base_url,
            clock=clock,
            policy=policy or RetryPolicy(max_attempts=5),
            timeout_s=5.0,
            # At 1,000× real time the default run deadline is 7 s of real time, which a busy
            # machine can spend; these tests are about calls, not the deadline (tested on its own).
            faults=FaultSettings(waits=WaitLimits(run_deadline_s=7 * 86_400)),
        )
        calibrator = Calibrator(DEFAULT_MODEL, access, **{"poll_interval_s": 1.0, **kwargs})
        made.append(calibrator)
        return calibrator

    yield factory
    for calibrator in made:
        await calibrator.aclose()


# --- model, price, key ------------------------------------------------------------------------------


def test_default_model_is_the_newest_opus_alias_of_the_pinned_sdk() -> None:
    sdk_ids = get_args(get_args(Model)[0])
    assert DEFAULT_MODEL in sdk_ids
    assert DEFAULT_MODEL == "claude-opus-5-5"  # pinned anthropic 2.12.0; update with the SDK
    assert newest_opus(["claude-opus-4-5-20251101", "claude-opus-4-8", "claude-opus-5"]) == "claude-opus-5"
    assert newest_opus(["claude-opus-4-20250514", "claude-opus-4-6"]) == "claude-opus-4-6"


def test_default_model_is_priced() -> None:
    price = lookup_price(DEFAULT_MODEL)
    assert (price.input, price.output, price.cache_write, price.cache_read) == (4.0, 20.0, 5.0, 0.2)
    assert price.cache_write_1h == 8.0  # 1-hour TTL writes: 2x input (5-minute writes are 1.25x)


def test_missing_key_is_one_clear_line() -> None:
    with pytest.raises(CalibratorConfigError, match="set ANTHROPIC_API_KEY"):
        api_key_from_env({})
    assert api_key_from_env({"ANTHROPIC_API_KEY": " k "}) == "k"


def test_cost_estimate_writes_the_prefix_once_and_reads_it_after() -> None:
    price = Price(input=4.0, output=20.0, cache_write=5.0, cache_write_1h=8.0, cache_read=0.2)
    count = TokenCount(prefix_tokens=10_000, turn_tokens=2_000, tests=11)
    estimate = estimate_cost(count, price, batch=False)
    prompt = Usage(input_tokens=2_000, cache_creation_input_tokens=10_000, cache_read_input_tokens=100_000)
    assert estimate.input_usd == pytest.approx(cost_usd(prompt, price))
    assert estimate.max_usd > estimate.typical_usd > estimate.input_usd
    one_hour_premium = 10_000 * (8.0 - 5.0) / 1e6  # a batch writes the prefix with the 1-hour TTL
    assert estimate_cost(count, price, batch=True).typical_usd == pytest.approx(
        (estimate.typical_usd + one_hour_premium) * BATCH_DISCOUNT
    )
    assert estimate_cost(TokenCount(100, 0, 0), price, batch=False).typical_usd == 0


def test_batch_estimate_writes_the_prefix_at_the_one_hour_rate() -> None:
    price = lookup_price(DEFAULT_MODEL)
    count = TokenCount(prefix_tokens=10_000, turn_tokens=0, tests=1)
    sequential = estimate_cost(count, price, batch=False).input_usd
    batch = estimate_cost(count, price, batch=True).input_usd
    assert sequential == pytest.approx(10_000 * 5.0e-6)  # 1.25x $4
    assert batch == pytest.approx(10_000 * 8.0e-6 * BATCH_DISCOUNT)  # 2x $4, at half price


# --- calls through the SDK --------------------------------------------------------------------------


async def test_requests_cache_the_kb_prefix_and_ask_for_structured_output(
    emulator: EmulatorHandle, make: Factory
) -> None:
    kb, tests, prompts = tenant()
    calls = await make().calibrate(kb, prompts)
    assert [c.test_id for c in calls] == [t.test_id for t in tests]
    sent = emulator.counts.requests("/v1/messages")
    assert len(sent) == len(tests)
    first = sent[0]
    assert first["model"] == DEFAULT_MODEL
    assert first["system"] == [
        {"type": "text", "text": SYSTEM_INSTRUCTIONS},
        {"type": "text", "text": kb_text(kb), "cache_control": {"type": "ephemeral"}},
    ]
    assert first["output_config"] == {"format": {"type": "json_schema", "schema": OUTPUT_SCHEMA}}
    assert "tool_choice" not in first and "tools" not in first  # forced tools fail on Opus 5.5
    assert {r["messages"][0]["content"] for r in sent} == {p.text for p in prompts}
    outcomes, _ = judge(calls, kb, resolve(tests, []))
    assert {o.status for o in outcomes} == {"proposed"}
    assert FAKE_ANTHROPIC_KEY not in json.dumps([c.model_dump(mode="json") for c in calls])


async def test_from_the_second_call_cache_reads_cover_the_kb_prefix(
    emulator: EmulatorHandle, make: Factory
) -> None:
    emulator.reconfigure(cache_min_tokens=CACHE_MIN_TOKENS)
    kb, _, prompts = sample()
    calibrator = make()
    count = await calibrator.count(kb, prompts)
    assert count.prefix_tokens > CACHE_MIN_TOKENS and count.tests == len(prompts) == 94
    calls = await calibrator.calibrate(kb, prompts)
    assert calls[0].usage.cache_creation_input_tokens >= 0.9 * count.prefix_tokens
    coverage = cache_read_coverage(calls, count.prefix_tokens)
    assert len(coverage) == 93 and min(coverage) >= 0.9
    # Below the model's minimum the API skips caching silently; the coverage shows it.
    kb_small, _, small_prompts = tenant()
    small = make()
    small_count = await small.count(kb_small, small_prompts)
    assert cache_read_coverage(await small.calibrate(kb_small, small_prompts), small_count.prefix_tokens) == [
        0.0
    ] * (len(small_prompts) - 1)


async def test_batch_matches_sequential_results(emulator: EmulatorHandle, make: Factory) -> None:
    emulator.reconfigure(batch_ready_s=0.3)
    kb, tests, prompts = sample()
    resolved = resolve(tests, [])
    sequential = await make().calibrate(kb, prompts)
    progress: list[tuple[str, int, int]] = []
    batched = await make(poll_interval_s=50.0).calibrate_batch(kb, prompts, lambda *p: progress.append(p))
    assert len(emulator.counts.requests("/v1/messages/batches")) == 1
    assert [c.test_id for c in batched] == [t.test_id for t in tests]
    assert {c.custom_id for c in batched} == {f"test-{i:05d}" for i in range(len(tests))}
    seq_outcomes, seq_diffs = judge(sequential, kb, resolved)
    batch_outcomes, batch_diffs = judge(batched, kb, resolved)
    assert batch_outcomes == seq_outcomes and batch_diffs == seq_diffs
    assert progress[0][1] == 0 and progress[-1][1:] == (94, 94) and len(progress) >= 2
    price = lookup_price(DEFAULT_MODEL)
    assert calls_cost(batched, price, batch=True) < calls_cost(sequential, price, batch=False)


async def test_a_batch_caches_the_kb_for_an_hour_and_pays_the_one_hour_write_rate(
    emulator: EmulatorHandle, make: Factory
) -> None:
    kb, _, prompts = tenant()
    batched = await make().calibrate_batch(kb, prompts)
    (batch_request,) = emulator.counts.requests("/v1/messages/batches")
    ttls = {r["params"]["system"][1]["cache_control"].get("ttl") for r in batch_request["requests"]}
    assert ttls == {"1h"}  # batch requests run over minutes to hours, in no set order
    (write,) = [c.usage for c in batched if c.usage.cache_creation_input_tokens]
    assert write.cache_creation_1h_input_tokens == write.cache_creation_input_tokens > 0
    as_five_minute = write.model_copy(update={"cache_creation_1h_input_tokens": 0})
    premium = write.cache_creation_input_tokens * (8.0 - 5.0) / 1e6  # Opus 5.5: $8 vs $5 per MTok
    price = lookup_price(DEFAULT_MODEL)
    assert cost_usd(write, price) == pytest.approx(cost_usd(as_five_minute, price) + premium)
    sequential = await make().calibrate(kb, prompts)
    assert "ttl" not in emulator.counts.requests("/v1/messages")[0]["system"][1]["cache_control"]
    assert all(c.usage.cache_creation_1h_input_tokens == 0 for c in sequential)


async def test_malformed_output_rejects_only_that_test(emulator: EmulatorHandle, make: Factory) -> None:
    emulator.reconfigure(fault_rate=0.3, faults=("malformed",), seed=7)
    kb, tests, prompts = sample()
    outcomes, _ = judge(await make().calibrate(kb, prompts), kb, resolve(tests, []))
    rejected = [o for o in outcomes if o.status == "rejected"]
    reasons = " | ".join(o.reason or "" for o in rejected)
    assert "unknown entity 'not_a_kb_entity'" in reasons
    assert "expected_primary is empty" in reasons
    assert "output is not valid JSON" in reasons
    assert len(rejected) == emulator.stats["faults"]["malformed"]
    assert sum(o.status == "proposed" for o in outcomes) == len(tests) - len(rejected)


async def test_api_failures_error_that_test_and_the_rest_go_on(
    emulator: EmulatorHandle, make: Factory
) -> None:
    emulator.reconfigure(fault_rate=0.5, faults=("500",), seed=3)
    kb, tests, prompts = tenant()
    calls: list[CallRecord] = await make(policy=RetryPolicy(max_attempts=1)).calibrate(kb, prompts)
    errored = [c for c in calls if c.error is not None]
    assert errored and len(errored) < len(calls)
    assert all(c.error == "HTTP 500 after 1 attempt" and c.response is None for c in errored)
    outcomes, _ = judge(calls, kb, resolve(tests, []))
    assert sum(o.status == "proposed" for o in outcomes) == len(calls) - len(errored)
